// Package domain holds anvil's rules: accounts, projects and their run
// queues, webhooks, the feed, incidents and production cards. It knows
// nothing of HTTP or HTML; every per-project mutation runs in one
// transaction that first locks the project row.
package domain

import (
	"errors"
	"fmt"
)

// Sentinel kinds. Callers test with errors.Is; the web tier maps each onto
// one status code in a single error handler.
var (
	ErrNotFound     = errors.New("not found")
	ErrInvalid      = errors.New("invalid")
	ErrConflict     = errors.New("conflict")
	ErrForbidden    = errors.New("forbidden")
	ErrUnauthorized = errors.New("unauthorized")
	// ErrQueueFull is a manual trigger refused because the project already
	// holds the maximum of accepted queued runs.
	ErrQueueFull = errors.New("project queue full")
	// ErrWebhookQueueFull is the same condition met by a verified webhook
	// delivery; the public route answers it with 503 and Retry-After.
	ErrWebhookQueueFull = errors.New("project queue full (webhook)")
)

// Error is a refusal a client can act on: a stable snake_case Code, a
// Message for people, and the sentinel Kind it belongs to.
type Error struct {
	Kind    error
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Message }
func (e *Error) Unwrap() error { return e.Kind }

func newError(kind error, code, format string, args ...any) *Error {
	return &Error{Kind: kind, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Invalid is a validation refusal.
func Invalid(code, format string, args ...any) error {
	return newError(ErrInvalid, code, format, args...)
}

// NotFound names what was not found.
func NotFound(what string) error {
	return newError(ErrNotFound, "not_found", "%s not found", what)
}

// Conflict is a refusal because of the current state.
func Conflict(code, format string, args ...any) error {
	return newError(ErrConflict, code, format, args...)
}

// Forbidden is a refusal because of the caller's role.
func Forbidden(format string, args ...any) error {
	return newError(ErrForbidden, "forbidden", format, args...)
}
