package sentry

import (
	"bytes"
	"encoding/json"
	"strings"

	fastjson "github.com/segmentio/encoding/json"
)

// The browser's own fields (docs/contracts/feed.md, "What stage B
// changes"): contexts.browser and contexts.os when the SDK sends them,
// else request.headers.User-Agent — the browser SDKs send only that, and
// the feed reads browser and OS out of it (event.ParseUserAgent), as
// Sentry's server does. debug_meta passes through for the source-map step.

type feedClient struct {
	Name    string `json:"name,omitempty"`
	Version string `json:"version,omitempty"`
}

func browserFields(se *sentryEvent, fe *feedEvent) {
	if b := context(se.Contexts.Browser); b != nil {
		fe.Browser, _ = fastjson.Marshal(b)
	}
	fe.OS = context(se.Contexts.OS)
	if dm := bytes.TrimSpace(se.DebugMeta); len(dm) > 0 && dm[0] == '{' {
		fe.DebugMeta = dm
	}
	if fe.Browser != nil || se.Request == nil {
		return
	}
	if ua := userAgent(se.Request.Headers); ua != "" {
		// The feed parses a browser string as a User-Agent; an explicit
		// contexts.os still wins over the one read from it.
		fe.Browser, _ = fastjson.Marshal(ua)
	}
}

// context reads contexts.browser or contexts.os: {name, version}.
func context(raw json.RawMessage) *feedClient {
	if len(raw) == 0 || raw[0] != '{' {
		return nil
	}
	var c struct {
		Name    any `json:"name"`
		Version any `json:"version"`
	}
	if fastjson.Unmarshal(raw, &c) != nil {
		return nil
	}
	out := &feedClient{Name: str(c.Name), Version: str(c.Version)}
	if *out == (feedClient{}) {
		return nil
	}
	return out
}

func str(v any) string {
	s, _ := v.(string)
	return strings.TrimSpace(s)
}

// userAgent is request.headers' User-Agent (any case), from an object or
// a list of [name, value] pairs.
func userAgent(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return ""
	}
	switch raw[0] {
	case '{':
		var m map[string]json.RawMessage
		if fastjson.Unmarshal(raw, &m) != nil {
			return ""
		}
		for k, v := range m {
			if strings.EqualFold(k, "User-Agent") {
				return scalar(v)
			}
		}
	case '[':
		var pairs [][]json.RawMessage
		if fastjson.Unmarshal(raw, &pairs) != nil {
			return ""
		}
		for _, p := range pairs {
			if len(p) == 2 && strings.EqualFold(scalar(p[0]), "User-Agent") {
				return scalar(p[1])
			}
		}
	}
	return ""
}
