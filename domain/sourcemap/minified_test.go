package sourcemap

import (
	"strings"
	"testing"

	"anvil/domain/event"
)

func TestLooksMinified(t *testing.T) {
	t.Parallel()
	node := &event.Event{SDK: event.SDK{Name: "sentry.javascript.node"}}
	otel := &event.Event{SDK: event.SDK{Name: "opentelemetry"}}
	browser := &event.Event{Browser: &event.Client{Name: "Firefox"}}
	withImage := &event.Event{DebugMeta: &event.DebugMeta{Images: []event.DebugImage{{Type: "sourcemap", DebugID: "c0ffee00-0000-4000-8000-000000000000", CodeFile: "/srv/app/dist/server.js"}}}}
	cases := []struct {
		name string
		ev   *event.Event
		f    event.Frame
		want bool
	}{
		{"node server file", node, event.Frame{File: "/srv/app/cart.js", Line: 3, Colno: 21}, false},
		{"otel server file", otel, event.Frame{File: "/srv/app/cart.js", Line: 3, Colno: 21}, false},
		{"node file url", node, event.Frame{File: "file:///srv/app/cart.js", Line: 3, Colno: 21}, false},
		{"no column", browser, event.Frame{File: "https://shop.test/app.js", Line: 3}, false},
		{"browser url", nil, event.Frame{File: "https://shop.test/assets/app.js", Line: 1, Colno: 83}, true},
		{"tilde path", nil, event.Frame{File: "~/assets/app.js", Line: 1, Colno: 83}, true},
		{"browser event", browser, event.Frame{File: "app.js", Line: 1, Colno: 8}, true},
		{"min.js", node, event.Frame{File: "/srv/app/public/vendor.min.js", Line: 1, Colno: 12}, true},
		{"hashed chunk", node, event.Frame{File: "/srv/app/dist/index-Bq2Ae1x9.mjs", Line: 1, Colno: 12}, true},
		{"bundle", node, event.Frame{File: "/srv/app/dist/server.bundle.js", Line: 1, Colno: 12}, true},
		{"column far right", node, event.Frame{File: "/srv/app/dist/server.js", Line: 1, Colno: 4812}, true},
		{"long line", node, event.Frame{File: "/srv/app/dist/server.js", Line: 1, Colno: 30, ContextCode: strings.Repeat("a", 600)}, true},
		{"debug id names it", withImage, event.Frame{File: "/srv/app/dist/server.js", Line: 1, Colno: 30}, true},
	}
	for _, c := range cases {
		if got := LooksMinified(c.ev, &c.f); got != c.want {
			t.Errorf("%s: LooksMinified = %v, want %v", c.name, got, c.want)
		}
	}
}
