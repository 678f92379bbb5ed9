package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"anvil/domain"
)

// maxAPIBody bounds private API request bodies.
const maxAPIBody = 1 << 20

var (
	errUnsupportedMedia = echo.NewHTTPError(http.StatusUnsupportedMediaType, "Content-Type must be application/json")
	errTooLarge         = echo.NewHTTPError(http.StatusRequestEntityTooLarge, fmt.Sprintf("request body must be at most %d bytes", maxAPIBody))
)

// bindJSON decodes a JSON body into v: 415 for another content type, 413
// above the bound, 400 for malformed JSON. Unknown fields are ignored so
// newer clients keep working.
func bindJSON(c echo.Context, v any) error { return decodeJSON(c, v, false) }

// bindJSONStrict is bindJSON for a body where a misspelt field would
// silently do something else (a run of the default branch for "brnach"):
// an unknown field is a 422 unknown_field naming it.
func bindJSONStrict(c echo.Context, v any) error { return decodeJSON(c, v, true) }

func decodeJSON(c echo.Context, v any, strict bool) error {
	mt, _, err := mime.ParseMediaType(c.Request().Header.Get(echo.HeaderContentType))
	if err != nil || mt != echo.MIMEApplicationJSON {
		return errUnsupportedMedia
	}
	body, err := io.ReadAll(io.LimitReader(c.Request().Body, maxAPIBody+1))
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, "could not read the request body")
	}
	if len(body) > maxAPIBody {
		return errTooLarge
	}
	if strict {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil && strings.HasPrefix(err.Error(), "json: unknown field ") {
			name := strings.TrimPrefix(err.Error(), "json: unknown field ")
			return domain.Invalid("unknown_field", "field %s is not known here", name)
		}
	}
	if err := json.Unmarshal(body, v); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return &domain.Error{Kind: errBadRequest, Code: "invalid_json", Message: fmt.Sprintf("request body is not valid JSON (at byte %d)", se.Offset)}
		case errors.As(err, &te):
			return &domain.Error{Kind: errBadRequest, Code: "invalid_json", Message: fmt.Sprintf("field %q must be a %s", te.Field, te.Type.String())}
		default:
			return &domain.Error{Kind: errBadRequest, Code: "invalid_json", Message: "request body is not a valid JSON object"}
		}
	}
	return nil
}

// errBadRequest is the kind of a malformed request (400).
var errBadRequest = errors.New("bad request")

func templEscape(s string) string { return html.EscapeString(s) }
