// Package domain holds anvil's rules: accounts, projects and their run
// queues, webhooks, the feed, incidents and production cards. It knows
// nothing of HTTP or HTML; every per-project mutation runs in one
// transaction that first locks the project row.
package domain

import (
	"errors"
	"fmt"
	"strings"
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
	// Fields lists every refused field of an input, when the refusal is
	// about fields (Code and Message are then the first one's and all of
	// them joined).
	Fields []FieldError
}

// FieldError is one refused field: its input name (as in JSON), a stable
// code, and the problem worded to follow the field's name ("slug" + " " +
// Problem reads as a sentence; so does a form label + " " + Problem).
type FieldError struct {
	Field   string
	Code    string
	Problem string
}

// FieldErrors collects the refusals of one input.
type FieldErrors []FieldError

// Add refuses field with code and a problem.
func (fe *FieldErrors) Add(field, code, format string, args ...any) {
	*fe = append(*fe, FieldError{Field: field, Code: code, Problem: fmt.Sprintf(format, args...)})
}

// Has reports whether field was refused.
func (fe FieldErrors) Has(field string) bool {
	for _, f := range fe {
		if f.Field == field {
			return true
		}
	}
	return false
}

// Err is nil when nothing was refused, else one Invalid error holding all.
func (fe FieldErrors) Err() error {
	if len(fe) == 0 {
		return nil
	}
	msgs := make([]string, len(fe))
	for i, f := range fe {
		msgs[i] = f.Field + " " + f.Problem
	}
	return &Error{Kind: ErrInvalid, Code: fe[0].Code, Message: strings.Join(msgs, "; "), Fields: fe}
}

func (e *Error) Error() string { return e.Message }
func (e *Error) Unwrap() error { return e.Kind }

// NewError is an *Error of kind with a code and a message.
func NewError(kind error, code, format string, args ...any) *Error {
	return &Error{Kind: kind, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Invalid is a validation refusal.
func Invalid(code, format string, args ...any) error {
	return NewError(ErrInvalid, code, format, args...)
}

// NotFound names what was not found.
func NotFound(what string) error {
	return NewError(ErrNotFound, "not_found", "%s not found", what)
}

// Conflict is a refusal because of the current state.
func Conflict(code, format string, args ...any) error {
	return NewError(ErrConflict, code, format, args...)
}

// Forbidden is a refusal because of the caller's role.
func Forbidden(format string, args ...any) error {
	return NewError(ErrForbidden, "forbidden", format, args...)
}

// ClipString cuts s to n bytes, marking the cut, for quoting input in
// an error message.
func ClipString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Errors of VerificationMaterial and Deliver that the public route answers
// without recording anything.
var (
	// ErrWebhookNotConfigured: no (or a deleted) webhook for this provider.
	ErrWebhookNotConfigured = &Error{Kind: ErrUnauthorized, Code: "webhook_not_configured",
		Message: "no webhook for this provider is configured on this project"}
	// ErrWebhookDisabled: the webhook exists but is disabled; a disabled
	// webhook accepts nothing.
	ErrWebhookDisabled = &Error{Kind: ErrForbidden, Code: "webhook_disabled",
		Message: "this webhook is disabled in anvil; a disabled webhook accepts nothing (enable it in the project's webhook settings)"}
	// ErrStaleMaterial: the delivery was verified with secrets the webhook
	// no longer has (rotated or replaced since they were read). Nothing was
	// recorded; verify again with fresh material.
	ErrStaleMaterial = &Error{Kind: ErrUnauthorized, Code: "invalid_signature",
		Message: "the delivery could not be verified: the webhook's secret changed while it was being verified"}
)
