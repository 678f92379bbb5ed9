package event

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// The browser's own fields (docs/contracts/feed.md, "What stage B
// changes"). Seed 004's release A accepted `browser` and read past it; stage
// B keeps it, with the operating system and, for the source-map step,
// each frame's abs_path and colno and the event's debug_meta — all as the
// sender wrote them, bounded like every other field and scrubbed.

// Client names a browser or an operating system.
type Client struct {
	Name    string `json:"name,omitempty"`
	Version string `json:"version,omitempty"`
}

// DebugMeta is Sentry's debug_meta as far as source maps need it: the
// debug ids of the bundles (type "sourcemap") that frames point into.
type DebugMeta struct {
	Images []DebugImage `json:"images,omitempty"`
}

// DebugImage is one entry of debug_meta.images.
type DebugImage struct {
	Type     string `json:"type,omitempty"`
	CodeFile string `json:"code_file,omitempty"`
	DebugID  string `json:"debug_id,omitempty"`
}

// MaxDebugImages bounds debug_meta.images (the ones beyond are dropped).
const MaxDebugImages = 100

// readClient reads `browser` or `os`: an object {name, version}, or — for
// `browser` — a User-Agent string, from which both are read. Anything else
// is read past, as release A read every `browser`: an event is never
// refused for the shape of a field it was accepted with before.
func readClient(raw json.RawMessage, uaOK bool) (c, os *Client) {
	if len(raw) == 0 {
		return nil, nil
	}
	switch raw[0] {
	case '{':
		var w struct {
			Name    any `json:"name"`
			Version any `json:"version"`
		}
		if json.Unmarshal(raw, &w) != nil {
			return nil, nil
		}
		c = &Client{Name: truncate(scalarString(w.Name), MaxShortChars), Version: truncate(scalarString(w.Version), MaxShortChars)}
		if *c == (Client{}) {
			return nil, nil
		}
		return c, nil
	case '"':
		var s string
		if !uaOK || json.Unmarshal(raw, &s) != nil {
			return nil, nil
		}
		return ParseUserAgent(s)
	}
	return nil, nil
}

func scalarString(v any) string {
	switch x := v.(type) {
	case string:
		return strings.TrimSpace(x)
	case float64:
		b, _ := json.Marshal(x)
		return string(b)
	}
	return ""
}

// readDebugMeta reads debug_meta.images, bounded; a malformed value is read
// past.
func readDebugMeta(raw json.RawMessage) *DebugMeta {
	if len(raw) == 0 || raw[0] != '{' {
		return nil
	}
	var w struct {
		Images []json.RawMessage `json:"images"`
	}
	if json.Unmarshal(raw, &w) != nil {
		return nil
	}
	dm := &DebugMeta{}
	for _, r := range w.Images {
		if len(dm.Images) == MaxDebugImages {
			break
		}
		var im struct {
			Type     any `json:"type"`
			CodeFile any `json:"code_file"`
			DebugID  any `json:"debug_id"`
		}
		if json.Unmarshal(r, &im) != nil {
			continue
		}
		d := DebugImage{Type: truncate(scalarString(im.Type), MaxShortChars), CodeFile: truncate(scalarString(im.CodeFile), MaxURLChars),
			DebugID: truncate(scalarString(im.DebugID), MaxShortChars)}
		if d != (DebugImage{}) {
			dm.Images = append(dm.Images, d)
		}
	}
	if len(dm.Images) == 0 {
		return nil
	}
	return dm
}

// ParseUserAgent reads the browser and the operating system out of a
// User-Agent header — what Sentry's own server infers when an SDK sends no
// contexts.browser (the browser SDKs send only request.headers). It knows
// the engines that matter and says nothing rather than guess otherwise.
func ParseUserAgent(ua string) (browser, os *Client) {
	ua = truncate(ua, 1024)
	if strings.TrimSpace(ua) == "" {
		return nil, nil
	}
	// Order matters: Edge and Opera say Chrome too, Chrome says Safari.
	for _, p := range []struct{ token, name string }{
		{"Edg/", "Edge"}, {"EdgA/", "Edge"}, {"EdgiOS/", "Edge"}, {"OPR/", "Opera"}, {"SamsungBrowser/", "Samsung Internet"},
		{"Firefox/", "Firefox"}, {"FxiOS/", "Firefox"}, {"CriOS/", "Chrome"}, {"HeadlessChrome/", "Chrome"}, {"Chrome/", "Chrome"},
	} {
		if v, ok := uaVersion(ua, p.token); ok {
			browser = &Client{Name: p.name, Version: v}
			break
		}
	}
	if browser == nil && strings.Contains(ua, "Safari/") {
		v, _ := uaVersion(ua, "Version/")
		browser = &Client{Name: "Safari", Version: v}
	}
	switch {
	case strings.Contains(ua, "Windows NT"):
		os = &Client{Name: "Windows"}
		if v, ok := uaVersion(ua, "Windows NT "); ok {
			os.Version = v
		}
	case strings.Contains(ua, "iPhone") || strings.Contains(ua, "iPad"):
		os = &Client{Name: "iOS", Version: underscoreVersion(ua, "OS ")}
	case strings.Contains(ua, "Mac OS X"):
		os = &Client{Name: "macOS", Version: underscoreVersion(ua, "Mac OS X ")}
	case strings.Contains(ua, "Android"):
		os = &Client{Name: "Android"}
		if v, ok := uaVersion(ua, "Android "); ok {
			os.Version = v
		}
	case strings.Contains(ua, "CrOS"):
		os = &Client{Name: "Chrome OS"}
	case strings.Contains(ua, "Linux"):
		os = &Client{Name: "Linux"}
	}
	return browser, os
}

// uaVersion is the version after token: digits and dots.
func uaVersion(ua, token string) (string, bool) {
	i := strings.Index(ua, token)
	if i < 0 {
		return "", false
	}
	rest := ua[i+len(token):]
	end := 0
	for end < len(rest) && (rest[end] >= '0' && rest[end] <= '9' || rest[end] == '.') {
		end++
	}
	return strings.TrimRight(rest[:end], "."), true
}

// underscoreVersion reads "10_15_7" after token as "10.15.7".
func underscoreVersion(ua, token string) string {
	i := strings.Index(ua, token)
	if i < 0 {
		return ""
	}
	rest := ua[i+len(token):]
	end := 0
	for end < len(rest) && (rest[end] >= '0' && rest[end] <= '9' || rest[end] == '_' || rest[end] == '.') {
		end++
	}
	return strings.ReplaceAll(rest[:end], "_", ".")
}

// scrubClients scrubs the browser, the OS and the debug images' files like
// every other free text (a bundle's URL may carry a token in its query).
func scrubClients(e *Event) error {
	var err error
	for _, c := range []*Client{e.Browser, e.OS} {
		if c == nil {
			continue
		}
		if c.Name, err = scrubField("browser.name", c.Name); err != nil {
			return err
		}
		if c.Version, err = scrubField("browser.version", c.Version); err != nil {
			return err
		}
	}
	if e.DebugMeta != nil {
		for i := range e.DebugMeta.Images {
			im := &e.DebugMeta.Images[i]
			if im.CodeFile, err = scrubField("debug_meta.images.code_file", im.CodeFile); err != nil {
				return err
			}
			if !utf8.ValidString(im.Type) || !utf8.ValidString(im.DebugID) {
				return invalidUTF8("debug_meta.images")
			}
		}
	}
	return nil
}
