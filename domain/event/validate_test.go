package event

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestValidateCurlExample(t *testing.T) {
	t.Parallel()
	ev := mustValidate(t, json.RawMessage(curlExample))
	want := Event{
		SchemaVersion: "1.0",
		EventID:       exampleID,
		Timestamp:     time.Date(2026, 9, 16, 10, 11, 12, 0, time.UTC),
		Title:         "NullPointerException in CheckoutService",
		Level:         "error",
		Environment:   "production",
		Service:       "shop-api",
		Language:      "java",
		SDK:           SDK{Name: "anvil-feed-java", Version: "0.1.0", Runtime: "jdk-25"},
		Release:       "2026.9.3",
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"schema_version", ev.SchemaVersion, want.SchemaVersion},
		{"event_id", ev.EventID, want.EventID},
		{"timestamp", ev.Timestamp, want.Timestamp},
		{"title", ev.Title, want.Title},
		{"level", ev.Level, want.Level},
		{"environment", ev.Environment, want.Environment},
		{"service", ev.Service, want.Service},
		{"language", ev.Language, want.Language},
		{"sdk", ev.SDK, want.SDK},
		{"release", ev.Release, want.Release},
		{"exception.type", ev.Exception.Type, "java.lang.NullPointerException"},
		{"exception.message", ev.Exception.Message, `Cannot invoke "Cart.total()" because "cart" is null`},
		{"frame", ev.Exception.Stacktrace[0], Frame{File: "CheckoutService.java", Line: 88, Function: "charge", ContextCode: "var sum = cart.total();", InApp: true}},
		{"request", *ev.Request, Request{Method: "POST", URL: "https://shop.example/api/checkout", StatusCode: 500}},
		{"user", ev.User, User{ID: "u-4711"}},
		{"breadcrumbs", fmt.Sprint(ev.Breadcrumbs), "[cart.add sku=A1 checkout.start]"},
		{"tags", fmt.Sprint(ev.Tags), "map[tier:gold]"},
		{"enrichment", fmt.Sprint(ev.Enrichment), "map[affected_file:src/main/java/shop/CheckoutService.java]"},
		{"agent_context", fmt.Sprint(ev.AgentContext), "map[branch:main repo:shop/api suggested_ticket_type:bug]"},
		{"canonical id", ev.CanonicalID(), exampleID},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Fatalf("%s = %#v, want %#v", c.name, c.got, c.want)
		}
	}
}

func TestValidateNotAnObject(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{"null", "42", `"f4b1a0c2-0f4a-4a1e-9d7a-2b6c5d8e1f30"`, "true", "[]", `[{"event_id":"x"}]`, "", "   "} {
		_, rej := Validate(json.RawMessage(raw))
		if rej == nil || rej.ReasonCode != SchemaViolation || rej.EventID != nil {
			t.Fatalf("Validate(%q) = %+v, want schema_violation with nil event_id", raw, rej)
		}
	}
}

func TestValidateRequiredFields(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		edit    func(m map[string]any)
		mention string
		nilEcho bool
	}{
		{"event_id missing", func(m map[string]any) { delete(m, "event_id") }, "event_id", true},
		{"event_id empty", func(m map[string]any) { m["event_id"] = "" }, "event_id", false},
		{"timestamp", func(m map[string]any) { delete(m, "timestamp") }, "timestamp", false},
		{"title", func(m map[string]any) { delete(m, "title") }, "title", false},
		{"title blank", func(m map[string]any) { m["title"] = "  \t" }, "title", false},
		{"level", func(m map[string]any) { delete(m, "level") }, "level", false},
		{"environment", func(m map[string]any) { delete(m, "environment") }, "environment", false},
		{"service", func(m map[string]any) { delete(m, "service") }, "service", false},
		{"sdk", func(m map[string]any) { delete(m, "sdk") }, "sdk", false},
		{"sdk null", func(m map[string]any) { m["sdk"] = nil }, "sdk", false},
		{"sdk.name", func(m map[string]any) { delete(obj(m, "sdk"), "name") }, "sdk.name", false},
		{"exception.type", func(m map[string]any) { delete(obj(m, "exception"), "type") }, "exception.type", false},
		{"exception empty", func(m map[string]any) { m["exception"] = map[string]any{} }, "exception.type", false},
	}
	for _, c := range cases {
		_, rej := Validate(example(t, c.edit))
		if rej == nil || rej.ReasonCode != SchemaViolation {
			t.Fatalf("%s: got %+v, want schema_violation", c.name, rej)
		}
		if !strings.Contains(rej.Message, c.mention) {
			t.Fatalf("%s: message %q does not name %q", c.name, rej.Message, c.mention)
		}
		if c.nilEcho != (rej.EventID == nil) {
			t.Fatalf("%s: echoed id %v, want nil=%v", c.name, rej.EventID, c.nilEcho)
		}
		if !c.nilEcho && c.name != "event_id empty" && *rej.EventID != exampleID {
			t.Fatalf("%s: echoed id %q", c.name, *rej.EventID)
		}
	}

	// Optional fields may all be absent, and an absent exception is fine.
	ev := mustValidate(t, json.RawMessage(`{"event_id":"`+exampleID+`","timestamp":"2026-09-16T10:11:12Z","title":"t","level":"info","environment":"dev","service":"s","sdk":{"name":"n"}}`))
	if ev.Exception != nil || ev.Request != nil || ev.SchemaVersion != "1.0" {
		t.Fatalf("minimal event = %+v", ev)
	}
}

func TestValidateEnvironmentLabel(t *testing.T) {
	t.Parallel()
	cases := []struct {
		env    string
		stored string // "" means rejected
		rule   string
	}{
		{"production", "production", ""},
		{"Production", "production", ""},
		{"eu-west-1.blue_2", "eu-west-1.blue_2", ""},
		{"7", "7", ""},
		{strings.Repeat("a", 64), strings.Repeat("a", 64), ""},
		{strings.Repeat("a", 65), "", "at most 64"},
		{"-prod", "", "starting with a letter or digit"},
		{".prod", "", "starting with a letter or digit"},
		{"_prod", "", "starting with a letter or digit"},
		{"pro duction", "", "letters, digits"},
		{"prod/eu", "", "letters, digits"},
		{"prödu", "", "letters, digits"},
		{"*", "", "starting with a letter or digit"},
	}
	for _, c := range cases {
		ev, rej := Validate(example(t, func(m map[string]any) { m["environment"] = c.env }))
		if c.stored != "" {
			if rej != nil {
				t.Fatalf("%q: rejected: %s", c.env, rej.Message)
			}
			if ev.Environment != c.stored {
				t.Fatalf("%q: stored %q, want %q", c.env, ev.Environment, c.stored)
			}
			continue
		}
		if rej == nil || rej.ReasonCode != SchemaViolation || !strings.Contains(rej.Message, c.rule) || !strings.Contains(rej.Message, "label") {
			t.Fatalf("%q: got %+v, want schema_violation naming %q", c.env, rej, c.rule)
		}
	}
}

func TestValidateEventID(t *testing.T) {
	t.Parallel()
	cases := []struct {
		id   any
		ok   bool
		echo any // string echoed, or nil
	}{
		{exampleID, true, exampleID},
		{"F4B1A0C2-0F4A-4A1E-9D7A-2B6C5D8E1F30", true, "F4B1A0C2-0F4A-4A1E-9D7A-2B6C5D8E1F30"},
		{"F4b1A0c2-0f4A-4a1e-9D7a-2b6c5d8e1f30", true, "F4b1A0c2-0f4A-4a1e-9D7a-2b6c5d8e1f30"},
		{"00000000-0000-0000-0000-000000000000", true, "00000000-0000-0000-0000-000000000000"},
		{"f4b1a0c20f4a4a1e9d7a2b6c5d8e1f30", false, "f4b1a0c20f4a4a1e9d7a2b6c5d8e1f30"},
		{"{f4b1a0c2-0f4a-4a1e-9d7a-2b6c5d8e1f30}", false, "{f4b1a0c2-0f4a-4a1e-9d7a-2b6c5d8e1f30}"},
		{"urn:uuid:f4b1a0c2-0f4a-4a1e-9d7a-2b6c5d8e1f30", false, "urn:uuid:f4b1a0c2-0f4a-4a1e-9d7a-2b6c5d8e1f30"},
		{"g4b1a0c2-0f4a-4a1e-9d7a-2b6c5d8e1f30", false, "g4b1a0c2-0f4a-4a1e-9d7a-2b6c5d8e1f30"},
		{"f4b1a0c2-0f4a-4a1e-9d7a-2b6c5d8e1f3", false, "f4b1a0c2-0f4a-4a1e-9d7a-2b6c5d8e1f3"},
		{" f4b1a0c2-0f4a-4a1e-9d7a-2b6c5d8e1f30", false, " f4b1a0c2-0f4a-4a1e-9d7a-2b6c5d8e1f30"},
		{"order-42", false, "order-42"},
		{42, false, nil},
	}
	for _, c := range cases {
		ev, rej := Validate(example(t, func(m map[string]any) { m["event_id"] = c.id }))
		if c.ok {
			if rej != nil {
				t.Fatalf("%v: rejected: %s", c.id, rej.Message)
			}
			if ev.EventID != c.echo || ev.CanonicalID() != strings.ToLower(c.echo.(string)) {
				t.Fatalf("%v: EventID %q CanonicalID %q", c.id, ev.EventID, ev.CanonicalID())
			}
			continue
		}
		if rej == nil || rej.ReasonCode != SchemaViolation {
			t.Fatalf("%v: got %+v, want schema_violation", c.id, rej)
		}
		if c.echo == nil {
			if rej.EventID != nil {
				t.Fatalf("%v: echoed %q, want nil", c.id, *rej.EventID)
			}
			continue
		}
		if rej.EventID == nil || *rej.EventID != c.echo {
			t.Fatalf("%v: echoed %v, want it as spelled", c.id, rej.EventID)
		}
		if !strings.Contains(rej.Message, "canonical UUID") || !strings.Contains(rej.Message, "8-4-4-4-12") {
			t.Fatalf("%v: message %q does not name the format", c.id, rej.Message)
		}
	}
}

func TestValidateSchemaVersion(t *testing.T) {
	t.Parallel()
	const absent = "<absent>"
	cases := []struct {
		version any
		reason  string // "" = accepted
		stored  string
	}{
		{"1.0", "", "1.0"},
		{"1.7", "", "1.7"},
		{"1", "", "1"},
		{"1.7.2", "", "1.7.2"},
		{"01.2", "", "01.2"},
		{absent, "", "1.0"},
		{nil, "", "1.0"},
		{"2.0", UnsupportedSchemaVersion, ""},
		{"2", UnsupportedSchemaVersion, ""},
		{"0.9", UnsupportedSchemaVersion, ""},
		{"10.0", UnsupportedSchemaVersion, ""},
		{"x", SchemaViolation, ""},
		{"", SchemaViolation, ""},
		{"1.x", SchemaViolation, ""},
		{"v1.0", SchemaViolation, ""},
		{"1..0", SchemaViolation, ""},
		{"1.", SchemaViolation, ""},
		{".1", SchemaViolation, ""},
		{"1.0.0.0", SchemaViolation, ""},
		{1.0, SchemaViolation, ""},
	}
	for _, c := range cases {
		raw := example(t, func(m map[string]any) {
			if c.version == absent {
				delete(m, "schema_version")
			} else {
				m["schema_version"] = c.version
			}
		})
		ev, rej := Validate(raw)
		if c.reason == "" {
			if rej != nil {
				t.Fatalf("%v: rejected: %s", c.version, rej.Message)
			}
			if ev.SchemaVersion != c.stored {
				t.Fatalf("%v: stored %q, want %q", c.version, ev.SchemaVersion, c.stored)
			}
			continue
		}
		if rej == nil || rej.ReasonCode != c.reason {
			t.Fatalf("%v: got %+v, want %s", c.version, rej, c.reason)
		}
		if rej.EventID == nil || *rej.EventID != exampleID {
			t.Fatalf("%v: event_id not echoed: %v", c.version, rej.EventID)
		}
		if !strings.Contains(rej.Message, "schema_version") {
			t.Fatalf("%v: message %q does not name schema_version", c.version, rej.Message)
		}
	}

	// A different major is judged before anything else: a major-2 event may
	// legitimately lack what major 1 requires.
	_, rej := Validate(example(t, func(m map[string]any) {
		m["schema_version"] = "2.0"
		delete(m, "title")
		m["level"] = 3
	}))
	if rej == nil || rej.ReasonCode != UnsupportedSchemaVersion {
		t.Fatalf("broken major-2 event: got %+v, want unsupported_schema_version", rej)
	}
}

func TestValidateTimestamp(t *testing.T) {
	t.Parallel()
	cases := []struct {
		ts   string
		want time.Time // zero = rejected
	}{
		{"2026-09-16T10:11:12Z", time.Date(2026, 9, 16, 10, 11, 12, 0, time.UTC)},
		{"2026-09-16T12:11:12+02:00", time.Date(2026, 9, 16, 10, 11, 12, 0, time.UTC)},
		{"2026-09-16T10:11:12.123456Z", time.Date(2026, 9, 16, 10, 11, 12, 123456000, time.UTC)},
		{"2026-09-16", time.Time{}},
		{"2026-09-16 10:11:12", time.Time{}},
		{"yesterday", time.Time{}},
		{"1758017472", time.Time{}},
	}
	for _, c := range cases {
		ev, rej := Validate(example(t, func(m map[string]any) { m["timestamp"] = c.ts }))
		if c.want.IsZero() {
			if rej == nil || rej.ReasonCode != SchemaViolation || !strings.Contains(rej.Message, "RFC 3339") {
				t.Fatalf("%q: got %+v, want schema_violation naming RFC 3339", c.ts, rej)
			}
			continue
		}
		if rej != nil {
			t.Fatalf("%q: rejected: %s", c.ts, rej.Message)
		}
		if !ev.Timestamp.Equal(c.want) || ev.Timestamp.Location() != time.UTC {
			t.Fatalf("%q: got %v, want %v in UTC", c.ts, ev.Timestamp, c.want)
		}
	}
}

func TestValidateLevel(t *testing.T) {
	t.Parallel()
	cases := []struct{ level, stored string }{
		{"debug", "debug"}, {"info", "info"}, {"warning", "warning"}, {"error", "error"}, {"fatal", "fatal"},
		{"ERROR", "error"}, {"Warning", "warning"},
		{"warn", ""}, {"critical", ""}, {"trace", ""},
	}
	for _, c := range cases {
		ev, rej := Validate(example(t, func(m map[string]any) { m["level"] = c.level }))
		if c.stored == "" {
			if rej == nil || rej.ReasonCode != SchemaViolation || !strings.Contains(rej.Message, "level must be one of") {
				t.Fatalf("%q: got %+v, want schema_violation", c.level, rej)
			}
			continue
		}
		if rej != nil || ev.Level != c.stored {
			t.Fatalf("%q: got %q, %+v; want %q", c.level, ev.Level, rej, c.stored)
		}
	}
}

func TestValidateWrongTypes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		edit    func(m map[string]any)
		mention string
	}{
		{"title number", func(m map[string]any) { m["title"] = 42 }, "title"},
		{"sdk string", func(m map[string]any) { m["sdk"] = "java" }, "sdk"},
		{"stacktrace object", func(m map[string]any) { obj(m, "exception")["stacktrace"] = map[string]any{} }, "stacktrace"},
		{"line string", func(m map[string]any) {
			obj(m, "exception")["stacktrace"].([]any)[0].(map[string]any)["line"] = "88"
		}, "line"},
		{"tag value number", func(m map[string]any) { obj(m, "tags")["n"] = 1 }, "tags"},
		{"breadcrumbs objects", func(m map[string]any) { m["breadcrumbs"] = []any{map[string]any{"message": "x"}} }, "breadcrumbs"},
		{"enrichment array", func(m map[string]any) { m["enrichment"] = []any{1} }, "enrichment"},
		{"agent_context string", func(m map[string]any) { m["agent_context"] = "x" }, "agent_context"},
	}
	for _, c := range cases {
		_, rej := Validate(example(t, c.edit))
		if rej == nil || rej.ReasonCode != SchemaViolation {
			t.Fatalf("%s: got %+v, want schema_violation", c.name, rej)
		}
		if !strings.Contains(rej.Message, c.mention) {
			t.Fatalf("%s: message %q does not name %q", c.name, rej.Message, c.mention)
		}
		if rej.EventID == nil || *rej.EventID != exampleID {
			t.Fatalf("%s: event_id not echoed", c.name)
		}
	}
}

func TestValidateRequestURL(t *testing.T) {
	t.Parallel()
	cases := []struct {
		url  string
		kept bool
	}{
		{"http://shop.example/x", true},
		{"https://shop.example/api/checkout?x=1", true},
		{"HTTPS://SHOP.EXAMPLE/", true},
		{"HtTp://shop.example/", true},
		{"javascript:alert(1)", false},
		{"JavaScript:alert(1)", false},
		{"data:text/html,<script>alert(1)</script>", false},
		{"file:///etc/passwd", false},
		{"myapp://checkout", false},
		{"//shop.example/x", false},
		{"/api/checkout", false},
		{" https://shop.example/", false},
		{"httpx://shop.example/", false},
	}
	for _, c := range cases {
		ev, rej := Validate(example(t, func(m map[string]any) { obj(m, "request")["url"] = c.url }))
		if rej != nil {
			t.Fatalf("%q: the event must stay valid, got %s", c.url, rej.Message)
		}
		if got := ev.Request.URL; (got == c.url) != c.kept || (!c.kept && got != "") {
			t.Fatalf("%q: stored %q, kept=%v", c.url, got, c.kept)
		}
		if ev.Request.Method != "POST" || ev.Request.StatusCode != 500 {
			t.Fatalf("%q: the rest of request was lost: %+v", c.url, ev.Request)
		}
	}
	// A request with nothing left is not kept at all.
	ev := mustValidate(t, example(t, func(m map[string]any) { m["request"] = map[string]any{"url": "file:///x"} }))
	if ev.Request != nil {
		t.Fatalf("empty request kept: %+v", ev.Request)
	}
}

func TestValidateBounds(t *testing.T) {
	t.Parallel()
	frames := func(n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = map[string]any{"file": fmt.Sprintf("f%d.go", i), "function": "fn", "line": i, "in_app": true}
		}
		return out
	}
	cases := []struct {
		name  string
		edit  func(m map[string]any)
		check func(ev Event) string // "" when fine
	}{
		{"title", func(m map[string]any) { m["title"] = strings.Repeat("x", 2000) }, func(ev Event) string {
			return wantCut(ev.Title, strings.Repeat("x", 1024), 976)
		}},
		{"title multi-byte", func(m map[string]any) { m["title"] = strings.Repeat("ü", 1030) }, func(ev Event) string {
			return wantCut(ev.Title, strings.Repeat("ü", 1024), 6)
		}},
		{"title at bound", func(m map[string]any) { m["title"] = strings.Repeat("x", 1024) }, func(ev Event) string {
			return wantEq(ev.Title, strings.Repeat("x", 1024))
		}},
		{"message", func(m map[string]any) { obj(m, "exception")["message"] = strings.Repeat("m", 9000) }, func(ev Event) string {
			return wantCut(ev.Exception.Message, strings.Repeat("m", 8192), 808)
		}},
		{"context_code", func(m map[string]any) {
			obj(m, "exception")["stacktrace"].([]any)[0].(map[string]any)["context_code"] = strings.Repeat("c", 1500)
		}, func(ev Event) string {
			return wantCut(ev.Exception.Stacktrace[0].ContextCode, strings.Repeat("c", 1024), 476)
		}},
		{"200 frames", func(m map[string]any) { obj(m, "exception")["stacktrace"] = frames(200) }, func(ev Event) string {
			st := ev.Exception.Stacktrace
			if len(st) != 50 || ev.Exception.FramesOmitted != 150 {
				return fmt.Sprintf("kept %d frames, omitted %d", len(st), ev.Exception.FramesOmitted)
			}
			if st[0].File != "f0.go" || st[24].File != "f24.go" || st[25].File != "f175.go" || st[49].File != "f199.go" {
				return fmt.Sprintf("wrong frames kept: %s %s %s %s", st[0].File, st[24].File, st[25].File, st[49].File)
			}
			return ""
		}},
		{"50 frames", func(m map[string]any) { obj(m, "exception")["stacktrace"] = frames(50) }, func(ev Event) string {
			if len(ev.Exception.Stacktrace) != 50 || ev.Exception.FramesOmitted != 0 {
				return "50 frames were cut"
			}
			return ""
		}},
		{"breadcrumbs", func(m map[string]any) {
			b := make([]any, 150)
			for i := range b {
				b[i] = fmt.Sprint("crumb ", i)
			}
			m["breadcrumbs"] = b
		}, func(ev Event) string {
			if len(ev.Breadcrumbs) != 100 || ev.BreadcrumbsOmitted != 50 || ev.Breadcrumbs[0] != "crumb 50" || ev.Breadcrumbs[99] != "crumb 149" {
				return fmt.Sprintf("kept %d, omitted %d, first %q", len(ev.Breadcrumbs), ev.BreadcrumbsOmitted, ev.Breadcrumbs[0])
			}
			return ""
		}},
		{"breadcrumb length", func(m map[string]any) { m["breadcrumbs"] = []any{strings.Repeat("b", 1100)} }, func(ev Event) string {
			return wantCut(ev.Breadcrumbs[0], strings.Repeat("b", 1024), 76)
		}},
		{"tags", func(m map[string]any) {
			tags := map[string]any{}
			for i := range 60 {
				tags[fmt.Sprintf("k%02d", i)] = "v"
			}
			m["tags"] = tags
		}, func(ev Event) string {
			_, first := ev.Tags["k00"]
			_, last := ev.Tags["k50"]
			if len(ev.Tags) != 50 || ev.TagsOmitted != 10 || !first || last {
				return fmt.Sprintf("kept %d, omitted %d", len(ev.Tags), ev.TagsOmitted)
			}
			return ""
		}},
		{"tag value", func(m map[string]any) { obj(m, "tags")["tier"] = strings.Repeat("g", 300) }, func(ev Event) string {
			return wantCut(ev.Tags["tier"], strings.Repeat("g", 256), 44)
		}},
		{"bag string", func(m map[string]any) { obj(m, "enrichment")["note"] = strings.Repeat("n", 3000) }, func(ev Event) string {
			return wantCut(ev.Enrichment["note"].(string), strings.Repeat("n", 2048), 952)
		}},
		{"bag items", func(m map[string]any) { obj(m, "enrichment")["list"] = make([]any, 130) }, func(ev Event) string {
			l := ev.Enrichment["list"].([]any)
			if len(l) != 101 || l[100] != "…[truncated 30 items]" {
				return fmt.Sprintf("list of %d, last %v", len(l), l[len(l)-1])
			}
			return ""
		}},
		{"bag keys", func(m map[string]any) {
			big := map[string]any{}
			for i := range 120 {
				big[fmt.Sprintf("k%03d", i)] = i
			}
			m["agent_context"] = big
		}, func(ev Event) string {
			if len(ev.AgentContext) != 101 || ev.AgentContext["[truncated]"] != "20 keys omitted" {
				return fmt.Sprintf("%d keys, marker %v", len(ev.AgentContext), ev.AgentContext["[truncated]"])
			}
			return ""
		}},
		{"bag depth", func(m map[string]any) {
			var v any = "deep"
			for range 15 {
				v = map[string]any{"d": v}
			}
			m["enrichment"] = v
		}, func(ev Event) string {
			var v any = ev.Enrichment
			for depth := 0; depth <= MaxBagDepth; depth++ {
				next, ok := v.(map[string]any)
				if !ok {
					return fmt.Sprintf("level %d is %v", depth, v)
				}
				v = next["d"]
			}
			return wantEq(fmt.Sprint(v), bagTooDeep)
		}},
		{"big integers survive", func(m map[string]any) { obj(m, "enrichment")["id"] = json.Number("12345678901234567890") }, func(ev Event) string {
			return wantEq(fmt.Sprint(ev.Enrichment["id"]), "12345678901234567890")
		}},
	}
	for _, c := range cases {
		ev := mustValidate(t, example(t, c.edit))
		if msg := c.check(ev); msg != "" {
			t.Fatalf("%s: %s", c.name, msg)
		}
	}
}

func wantCut(got, kept string, cut int) string {
	return wantEq(got, kept+fmt.Sprintf("…[truncated %d chars]", cut))
}

func wantEq(got, want string) string {
	if got != want {
		if len(got) > 80 {
			got = got[:40] + "…" + got[len(got)-40:]
		}
		return fmt.Sprintf("got %q", got)
	}
	return ""
}

// Stage B: `browser` is kept — an object's name and version, or
// a User-Agent string read for browser and OS; another shape is still
// accepted and read past, as release A read every `browser`.
func TestValidateBrowserKept(t *testing.T) {
	t.Parallel()
	chromeUA := "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/136.0.7103.25 Safari/537.36"
	for _, tc := range []struct {
		browser any
		os      any
		want    string
	}{
		{map[string]any{"name": "Firefox", "version": "131.0", "user_agent": "Mozilla/5.0"}, nil, `"browser":{"name":"Firefox","version":"131.0"}`},
		{map[string]any{"name": "Firefox", "version": "131.0"}, map[string]any{"name": "Windows", "version": "10"}, `"browser":{"name":"Firefox","version":"131.0"},"os":{"name":"Windows","version":"10"}`},
		{chromeUA, nil, `"browser":{"name":"Chrome","version":"136.0.7103.25"},"os":{"name":"Linux"}`},
		{nil, nil, ``},
		{42, nil, ``},
		{[]any{"x"}, nil, ``},
		{map[string]any{}, nil, ``},
	} {
		ev := mustValidate(t, example(t, func(m map[string]any) {
			m["browser"] = tc.browser
			if tc.os != nil {
				m["os"] = tc.os
			}
		}))
		out, err := json.Marshal(ev)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		if tc.want == "" && (strings.Contains(string(out), `"browser"`) || strings.Contains(string(out), `"os"`)) {
			t.Fatalf("%v: kept %s", tc.browser, out)
		}
		if !strings.Contains(string(out), tc.want) {
			t.Fatalf("%v: want %s in %s", tc.browser, tc.want, out)
		}
	}
}

// Frames keep abs_path, colno and lineno exactly as sent, and debug_meta's
// images survive: the source-map step needs them.
func TestValidateKeepsSourceMapFields(t *testing.T) {
	t.Parallel()
	ev := mustValidate(t, example(t, func(m map[string]any) {
		f := obj(m, "exception")["stacktrace"].([]any)[0].(map[string]any)
		f["abs_path"] = "https://shop.example/assets/app.min.js"
		f["colno"] = 12345
		f["line"] = 1
		m["debug_meta"] = map[string]any{"images": []any{map[string]any{"type": "sourcemap",
			"code_file": "https://shop.example/assets/app.min.js", "debug_id": "c941d8a4-3f59-4b3c-9c87-5d8d8a3f6f1e", "extra": 1}}}
	}))
	f := ev.Exception.Stacktrace[0]
	if f.AbsPath != "https://shop.example/assets/app.min.js" || f.Colno != 12345 || f.Line != 1 {
		t.Fatalf("frame %+v", f)
	}
	if ev.DebugMeta == nil || len(ev.DebugMeta.Images) != 1 || ev.DebugMeta.Images[0].DebugID != "c941d8a4-3f59-4b3c-9c87-5d8d8a3f6f1e" {
		t.Fatalf("debug_meta %+v", ev.DebugMeta)
	}
	out, err := Marshal(&ev)
	if err != nil {
		t.Fatal(err)
	}
	std, _ := json.Marshal(&ev)
	if string(out) != string(std) {
		t.Fatalf("Marshal and encoding/json disagree:\n%s\n%s", out, std)
	}
	for _, want := range []string{`"abs_path":"https://shop.example/assets/app.min.js","colno":12345`, `"debug_meta":{"images":[{"type":"sourcemap"`} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("want %s in %s", want, out)
		}
	}
}

func TestParseUserAgent(t *testing.T) {
	t.Parallel()
	for ua, want := range map[string]string{
		"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36":                         "Chrome 131.0.0.0 / Windows 10.0",
		"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0":           "Edge 131.0.0.0 / Windows 10.0",
		"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15":                   "Safari 18.1 / macOS 10.15.7",
		"Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1": "Safari 17.5 / iOS 17.5",
		"Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0":                                                                  "Firefox 133.0 / Linux ",
		"Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36":                   "Chrome 131.0.0.0 / Android 14",
		"curl/8.5.0": " / ",
		"":           " / ",
	} {
		b, o := ParseUserAgent(ua)
		got := " / "
		if b != nil || o != nil {
			var bs, os string
			if b != nil {
				bs = b.Name + " " + b.Version
			}
			if o != nil {
				os = o.Name + " " + o.Version
			}
			got = bs + " / " + os
		}
		if got != want {
			t.Errorf("%q: %q; want %q", ua, got, want)
		}
	}
}

func TestValidateUnknownFieldsIgnored(t *testing.T) {
	t.Parallel()
	edits := []func(m map[string]any){
		func(m map[string]any) { m["contexts"] = map[string]any{"os": "linux"} },
		func(m map[string]any) { m["fingerprint"] = []any{"custom"} },
		func(m map[string]any) { obj(m, "sdk")["integrations"] = []any{"x"} },
		func(m map[string]any) { obj(m, "exception")["mechanism"] = map[string]any{"handled": false} },
		func(m map[string]any) {
			obj(m, "exception")["stacktrace"].([]any)[0].(map[string]any)["vars"] = map[string]any{"x": 7}
		},
		func(m map[string]any) { obj(m, "user")["email"] = "a@example.com" },
	}
	for i, edit := range edits {
		ev := mustValidate(t, example(t, edit))
		out, _ := json.Marshal(ev)
		for _, unknown := range []string{"contexts", "fingerprint", "integrations", "mechanism", "vars", "email"} {
			if strings.Contains(string(out), unknown) {
				t.Fatalf("edit %d: unknown field %q stored: %s", i, unknown, out)
			}
		}
	}
}

func TestValidateDiscardsSenderIPHash(t *testing.T) {
	t.Parallel()
	for _, user := range []any{
		map[string]any{"id": "u-1", "ip_hash": "deadbeef"},
		map[string]any{"ip_hash": "deadbeef", "ip_address": "203.0.113.7"},
	} {
		ev := mustValidate(t, example(t, func(m map[string]any) { m["user"] = user }))
		if ev.User.IPHash != "" {
			t.Fatalf("sender's ip_hash kept: %q", ev.User.IPHash)
		}
		out, _ := json.Marshal(ev)
		if strings.Contains(string(out), "deadbeef") || strings.Contains(string(out), "203.0.113.7") {
			t.Fatalf("stored: %s", out)
		}
	}
}

func TestEventJSONShape(t *testing.T) {
	t.Parallel()
	ev := mustValidate(t, json.RawMessage(curlExample))
	ev.User.IPHash = "abc"
	out, err := json.Marshal(ev)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	for _, key := range []string{`"schema_version":"1.0"`, `"event_id":"` + exampleID + `"`, `"timestamp":"2026-09-16T10:11:12Z"`,
		`"context_code":`, `"in_app":true`, `"status_code":500`, `"ip_hash":"abc"`, `"agent_context":`, `"sdk":{"name":"anvil-feed-java"`} {
		if !strings.Contains(string(out), key) {
			t.Fatalf("JSON lacks %s: %s", key, out)
		}
	}
	var back Event
	if err := json.Unmarshal(out, &back); err != nil || back.Title != ev.Title || !back.Timestamp.Equal(ev.Timestamp) {
		t.Fatalf("round trip: %v %+v", err, back)
	}
}

// TestDecodeWireFastTakesTheCommonShape: the one-pass decoder reads the
// seed's example, and FuzzDecodeWire therefore holds it to encoding/json.
func TestDecodeWireFastTakesTheCommonShape(t *testing.T) {
	var w wireEvent
	if !decodeWireFast([]byte(curlExample), &w) {
		t.Fatal("the seed's example went to the general decoders")
	}
	if w.Title != "NullPointerException in CheckoutService" || len(w.Exception.Stacktrace) != 1 || w.Exception.Stacktrace[0].Line != 88 ||
		!w.Exception.Stacktrace[0].InApp || w.Tags["tier"] != "gold" || string(w.EventID) != `"`+exampleID+`"` || len(w.Enrichment) == 0 {
		t.Fatalf("decoded %+v", w)
	}
}

// TestValidateNamesAllMissingFields: an event lacking several required
// fields is refused with one message naming every one of them.
func TestValidateNamesAllMissingFields(t *testing.T) {
	_, rej := Validate([]byte(`{"event_id":"f4b1a0c2-0f4a-4a1e-9d7a-2b6c5d8e1f30","title":"x","sdk":{}}`))
	if rej == nil || rej.ReasonCode != SchemaViolation || rej.Message != "missing required fields: timestamp, level, environment, service, sdk.name" {
		t.Fatalf("rejection %+v", rej)
	}
	_, rej = Validate([]byte(`{"event_id":"f4b1a0c2-0f4a-4a1e-9d7a-2b6c5d8e1f30","timestamp":"2026-09-16T10:11:12Z","title":"x","level":"error","environment":"production","sdk":{"name":"s"}}`))
	if rej == nil || rej.Message != "service is required" {
		t.Fatalf("one missing field keeps its own message: %+v", rej)
	}
}
