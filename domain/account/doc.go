// Package account is the organisations, their people and roles, sessions,
// personal API tokens, invitations, one's own account, passwords and the
// one-time reveal of a secret (tables organizations, users, memberships,
// sessions, api_tokens, invitations, password_resets, session_reveals).
// It imports only the base domain.
package account
