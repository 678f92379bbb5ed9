package forgeapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"

	"github.com/google/go-github/v75/github"
)

// Error is a forge call that failed, as anvil may repeat it: the forge,
// the HTTP status and GitHub's validation code — never the body of the
// answer, its message or the URL (see the package comment). It is what
// [Clean] returns; its text goes into 422 answers, the run page's status
// report, an incident's reason and River's job errors.
type Error struct {
	Provider string // GitHub, GitLab, Gitea
	// Status is the answer's HTTP status, 0 when there was no answer.
	Status int
	// Code is GitHub's documented validation code (missing, missing_field,
	// invalid, already_exists, unprocessable, custom), when it sent one.
	Code string
	// Reason says what failed when there was no answer (or the answer of
	// a 2xx could not be read): anvil's own words.
	Reason string
	err    error
}

func (e *Error) Error() string {
	name := e.Provider
	if name == "" {
		name = "the forge"
	}
	if e.Status != 0 {
		s := fmt.Sprintf("%s answered HTTP %d", name, e.Status)
		if t := http.StatusText(e.Status); t != "" {
			s += " " + t
		}
		if e.Code != "" {
			s += " (" + e.Code + ")"
		}
		if e.Reason != "" {
			s += ": " + e.Reason
		}
		return s
	}
	return name + ": " + e.Reason
}

// Unwrap keeps errors.Is working on what the call failed with (a context's
// deadline, ErrPrivateForge); its text is never shown.
func (e *Error) Unwrap() error { return e.err }

// githubCodes are GitHub's documented validation error codes (REST API,
// "Client errors"); any other value is the forge's free text.
var githubCodes = map[string]bool{"missing": true, "missing_field": true, "invalid": true,
	"already_exists": true, "unprocessable": true, "custom": true}

// Clean turns what an SDK call returned into an *Error (nil when err is
// nil). resp is the SDK's response (nil when there was none).
func Clean(provider string, resp *http.Response, err error) error {
	if err == nil {
		return nil
	}
	var already *Error
	if errors.As(err, &already) {
		return already
	}
	e := &Error{Provider: ProviderName(provider), err: err}
	if resp != nil {
		e.Status = resp.StatusCode
	}
	var ger *github.ErrorResponse
	if errors.As(err, &ger) {
		if e.Status == 0 && ger.Response != nil {
			e.Status = ger.Response.StatusCode
		}
		for _, v := range ger.Errors {
			if githubCodes[v.Code] {
				e.Code = v.Code
				break
			}
		}
	}
	switch {
	case e.Status >= 300 && e.Status < 400:
		e.Reason = "redirects are not followed; set provider_api_url to the API's own address"
	case e.Status >= 200 && e.Status < 300:
		e.Reason = "an answer anvil cannot read"
	case e.Status != 0:
	default:
		e.Reason = networkReason(err)
	}
	return e
}

// networkReason names why no answer came, in anvil's words.
func networkReason(err error) string {
	var dns *net.DNSError
	var rl *github.RateLimitError
	var ne net.Error
	switch {
	case isPrivateRefusal(err):
		return "refused: its address is private (" + repourlHint + ")"
	case errors.As(err, &rl):
		return "its rate limit is spent until " + rl.Rate.Reset.UTC().Format("15:04:05 MST")
	case errors.Is(err, context.Canceled):
		return "the call was canceled"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "no answer in time"
	case errors.As(err, &dns):
		return "its host does not resolve"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "the connection was refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "the connection was reset"
	case strings.Contains(err.Error(), "tls:") || strings.Contains(err.Error(), "x509:"):
		return "the TLS handshake failed"
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return "a network error"
	}
	// Anything else failed before a request was sent (a malformed
	// address, a repository that is not owner/name): anvil's own text.
	var ue interface{ Unwrap() error }
	if !errors.As(err, &ue) {
		return err.Error()
	}
	return "the call failed"
}

const repourlHint = "an operator may allow private forges with ANVIL_CHECKOUT_ALLOW_LOCAL=true"
