package web

import (
	"encoding/json"

	"github.com/labstack/echo/v4"
)

// onceCookie carries a secret that a create shows once after its redirect
// (an invitation link): sealed under the operator key and bound to the
// session, so it is unreadable to anyone but this server and useless in
// another browser, and cleared by the page that shows it. Nothing of it is
// ever stored in the database.
const onceCookie = "anvil_once"

type onceValue struct {
	Kind  string `json:"k"`
	Value string `json:"v"`
	Label string `json:"l"`
}

func (s *Server) setOnce(c echo.Context, kind, value, label string) error {
	p := principal(c)
	if p == nil || p.SessionID == nil {
		return nil
	}
	raw, _ := json.Marshal(onceValue{Kind: kind, Value: value, Label: label})
	sealed, err := s.keys.Seal(raw, append([]byte("once:"), p.SessionID...))
	if err != nil {
		return err
	}
	s.setCookie(c, onceCookie, sealed, 120)
	return nil
}

// takeOnce returns the one-time value of kind, if any, and clears it.
func (s *Server) takeOnce(c echo.Context, kind string) (value, label string) {
	ck, err := c.Cookie(onceCookie)
	p := principal(c)
	if err != nil || ck.Value == "" || p == nil || p.SessionID == nil {
		return "", ""
	}
	s.setCookie(c, onceCookie, "", -1)
	raw, err := s.keys.Open(ck.Value, append([]byte("once:"), p.SessionID...))
	if err != nil {
		return "", ""
	}
	var v onceValue
	if json.Unmarshal(raw, &v) != nil || v.Kind != kind {
		return "", ""
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return v.Value, v.Label
}
