package feed_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"anvil/domain"
	"anvil/domain/feed"
)

// Entries of allowed_origins: what is kept (normalised) and what is a 422
// invalid_origin naming the entry.
func TestNormalizeOrigin(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"https://shop.example", "https://shop.example"},
		{"HTTPS://Shop.Example", "https://shop.example"},
		{"https://shop.example.", "https://shop.example"},
		{"https://shop.example:443", "https://shop.example"},
		{"http://shop.example:80", "http://shop.example"},
		{"http://localhost:5173", "http://localhost:5173"},
		{"https://*.shop.example", "https://*.shop.example"},
		{"https://*.Shop.Example.:8443", "https://*.shop.example:8443"},
		{"https://bücher.example", "https://xn--bcher-kva.example"},
		{"https://*.bücher.example", "https://*.xn--bcher-kva.example"},
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080"},
		{"http://[::1]:3000", "http://[::1]:3000"},
		{"http://[0:0:0:0:0:0:0:1]", "http://[::1]"},
		{"capacitor://localhost", "capacitor://localhost"},
	} {
		got, err := feed.NormalizeOrigin(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("NormalizeOrigin(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{
		"", "*", "null", "shop.example", "https://shop.example/", "https://shop.example/path",
		"https://shop.example?x=1", "https://shop.example#f", "https://user@shop.example",
		"https://*", "https://*.", "https://a.*.shop.example", "https://*shop.example", "https://**.shop.example",
		"https://*.*.shop.example", "https://shop.example:0", "https://shop.example:65536", "https://shop.example:",
		"https://shop.example:x", " https://shop.example", "https://*.127.0.0.1", "https://*.[::1]",
		"1https://shop.example", "https://[::1", "https://sh op.example",
	} {
		_, err := feed.NormalizeOrigin(in)
		var de *domain.Error
		if !errors.As(err, &de) || de.Code != "invalid_origin" {
			t.Errorf("NormalizeOrigin(%q) = %v; want invalid_origin", in, err)
			continue
		}
		if !strings.Contains(de.Message, fmt.Sprintf("%q", in)) {
			t.Errorf("message %q does not name the entry %q", de.Message, in)
		}
	}
}

// Request origins against a list: ports, wildcard labels, null, case,
// trailing dots, IDN.
func TestOriginAllowed(t *testing.T) {
	t.Parallel()
	list, err := feed.NormalizeOrigins([]string{"https://shop.example", "https://*.cdn.example", "http://localhost:5173",
		"https://bücher.example", "http://127.0.0.1:8080", "https://*.shop.example"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		origin string
		want   bool
	}{
		{"https://shop.example", true},
		{"https://SHOP.EXAMPLE", true},
		{"https://shop.example.", true},
		{"https://shop.example:443", true},
		{"http://shop.example", false},       // another scheme
		{"https://shop.example:8443", false}, // another port
		{"https://evil-shop.example", false},
		{"https://shop.example.evil", false},
		{"https://www.shop.example", true}, // one wildcard label
		{"https://a.b.shop.example", false},
		{"https://img.cdn.example", true},
		{"https://cdn.example", false}, // the wildcard is not the apex
		{"https://img.cdn.example:444", false},
		{"http://localhost:5173", true},
		{"http://localhost:5174", false},
		{"http://localhost", false},
		{"http://127.0.0.1:8080", true},
		{"http://127.0.0.1:8081", false},
		{"https://xn--bcher-kva.example", true},
		{"https://bücher.example", true},
		{"https://BÜCHER.example", true},
		{"null", false},
		{"", false},
		{"*", false},
		{"https://*.shop.example", false}, // a request never has a wildcard
		{"https://shop.example/", false},
		{"file://", false},
	} {
		if got := feed.OriginAllowed(list, tc.origin); got != tc.want {
			t.Errorf("OriginAllowed(%q) = %v; want %v", tc.origin, got, tc.want)
		}
	}
	if feed.OriginAllowed(nil, "https://shop.example") || feed.OriginAllowed([]string{}, "https://shop.example") {
		t.Error("an empty list must refuse every browser")
	}
}

func TestRefererOrigin(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://shop.example/cart?id=1": "https://shop.example",
		"http://localhost:5173/":         "http://localhost:5173",
		"HTTPS://Shop.Example/x":         "https://Shop.Example",
		"":                               "",
		"/relative":                      "",
		"not a url":                      "",
	} {
		if got := feed.RefererOrigin(in); got != want {
			t.Errorf("RefererOrigin(%q) = %q; want %q", in, got, want)
		}
	}
}

// The origin rule of both doors: server keys as seed 004 has them, browser
// keys by their list; neither header admits a browser key.
func TestJudgeOrigin(t *testing.T) {
	t.Parallel()
	srv := &feed.FeedSender{}
	br := &feed.FeedSender{Browser: true, AllowedOrigins: []string{"https://shop.example"}}
	empty := &feed.FeedSender{Browser: true, AllowedOrigins: []string{}}
	for _, tc := range []struct {
		name      string
		snd       *feed.FeedSender
		hasOrigin bool
		origin    string
		want      feed.OriginVerdict
	}{
		{"server without origin", srv, false, "", feed.OriginAdmitted},
		{"server with referer only", srv, false, "https://shop.example", feed.OriginAdmitted},
		{"server with origin", srv, true, "https://shop.example", feed.OriginRefused},
		{"server with null origin", srv, true, "null", feed.OriginRefused},
		{"browser listed", br, true, "https://shop.example", feed.OriginAdmitted},
		{"browser not listed", br, true, "https://evil.example", feed.OriginNotAllowed},
		{"browser null", br, true, "null", feed.OriginNotAllowed},
		{"browser empty origin header", br, true, "", feed.OriginNotAllowed},
		{"browser referer listed", br, false, "https://shop.example", feed.OriginAdmitted},
		{"browser referer not listed", br, false, "https://evil.example", feed.OriginNotAllowed},
		{"browser neither header", br, false, "", feed.OriginAdmitted},
		{"empty list, origin", empty, true, "https://shop.example", feed.OriginNotAllowed},
		{"empty list, neither header", empty, false, "", feed.OriginAdmitted},
	} {
		if got := tc.snd.JudgeOrigin(tc.hasOrigin, tc.origin); got != tc.want {
			t.Errorf("%s: %v; want %v", tc.name, got, tc.want)
		}
	}
}
