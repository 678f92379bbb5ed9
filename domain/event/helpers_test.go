package event

import (
	"encoding/json"
	"testing"
)

// curlExample is the event of the seed's curl example, byte for byte the
// body a conforming SDK posts.
const curlExample = `{ "schema_version": "1.0", "event_id": "f4b1a0c2-0f4a-4a1e-9d7a-2b6c5d8e1f30", "timestamp": "2026-09-16T10:11:12Z", "title": "NullPointerException in CheckoutService", "level": "error", "environment": "production", "service": "shop-api", "language": "java", "sdk": { "name": "anvil-feed-java", "version": "0.1.0", "runtime": "jdk-25" }, "exception": { "type": "java.lang.NullPointerException", "message": "Cannot invoke \"Cart.total()\" because \"cart\" is null", "stacktrace": [ { "file": "CheckoutService.java", "line": 88, "function": "charge", "context_code": "var sum = cart.total();", "in_app": true } ] }, "release": "2026.9.3", "request": { "method": "POST", "url": "https://shop.example/api/checkout", "status_code": 500 }, "user": { "id": "u-4711" }, "breadcrumbs": ["cart.add sku=A1", "checkout.start"], "tags": { "tier": "gold" }, "enrichment": { "affected_file": "src/main/java/shop/CheckoutService.java" }, "agent_context": { "suggested_ticket_type": "bug", "repo": "shop/api", "branch": "main" } }`

const exampleID = "f4b1a0c2-0f4a-4a1e-9d7a-2b6c5d8e1f30"

// example returns the curl example as a generic object, changed by edit, and
// encoded again: each test states only the difference it is about.
func example(t testing.TB, edit func(m map[string]any)) json.RawMessage {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(curlExample), &m); err != nil {
		t.Fatalf("curl example: %v", err)
	}
	if edit != nil {
		edit(m)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return b
}

// mustValidate validates raw and fails the test on a rejection.
func mustValidate(t testing.TB, raw json.RawMessage) Event {
	t.Helper()
	ev, rej := Validate(raw)
	if rej != nil {
		t.Fatalf("Validate rejected: %s: %s", rej.ReasonCode, rej.Message)
	}
	return ev
}

func obj(m map[string]any, key string) map[string]any {
	return m[key].(map[string]any)
}
