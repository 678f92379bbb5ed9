package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// zeroDivision is a ZeroDivisionError raised in function of file.
func zeroDivision(function, file string, line int, tags map[string]any) map[string]any {
	return ev(newID(), func(m map[string]any) {
		m["title"], m["level"] = "ZeroDivisionError: division by zero", "error"
		m["exception"] = map[string]any{"type": "ZeroDivisionError", "message": "division by zero", "stacktrace": []any{
			map[string]any{"file": "site-packages/framework/core.py", "line": 7, "function": "dispatch", "in_app": false},
			map[string]any{"file": file, "line": line, "function": function, "in_app": true},
			map[string]any{"file": "app/main.py", "line": 3, "function": "main", "in_app": true},
		}}
		m["tags"] = tags
	})
}

// TestInboxOpensOnUnresolvedAndTellsApart: the inbox opens on the
// unresolved incidents, closed and ignored ones behind their filters; the
// search finds short ids, culprit functions and files and tag values; each
// row shows its level and culprit frame, so two ZeroDivisionErrors are told
// apart; the API carries both.
func TestInboxOpensOnUnresolvedAndTellsApart(t *testing.T) {
	t.Parallel()
	f := newFeedFix(t, setup(t))
	batch := []any{
		zeroDivision("average", "app/stats.py", 41, map[string]any{"customer": "globex-industries"}),
		zeroDivision("ratio", "app/billing/invoice.py", 12, map[string]any{"customer": "initech"}),
		ev(newID(), func(m map[string]any) { m["title"], m["level"] = "Closed one", "warning" }),
		ev(newID(), func(m map[string]any) {
			m["title"] = "Ignored one"
			m["exception"] = map[string]any{"type": "Noise", "message": "noise"}
		}),
	}
	if r := f.send(t, "/api/feed/events/batch", f.token, batch); r.Status != 202 || len(r.Accept) != 4 {
		t.Fatalf("batch: %d %s", r.Status, r.Raw)
	}
	byTitle := map[string]map[string]any{}
	_, out := f.api(t, f.owner.Token, "GET", "/api/private/incidents", nil)
	for _, i := range out["incidents"].([]any) {
		m := i.(map[string]any)
		byTitle[m["title"].(string)+" "+fmt.Sprint(m["culprit"])] = m
	}
	avg := byTitle["ZeroDivisionError: division by zero average (app/stats.py:41)"]
	ratio := byTitle["ZeroDivisionError: division by zero ratio (app/billing/invoice.py:12)"]
	closed := byTitle["Closed one charge (CheckoutService.java:88)"]
	ignored := byTitle["Ignored one "]
	if avg == nil || ratio == nil || closed == nil || ignored == nil || avg["level"] != "error" || closed["level"] != "warning" {
		t.Fatalf("the API's level and culprit: %v", byTitle)
	}
	for id, d := range map[string]string{closed["id"].(string): "close", ignored["id"].(string): "ignore"} {
		if st, out := f.api(t, f.owner.Token, "POST", "/api/private/incidents/"+id+"/decisions", map[string]any{"decision": d}); st != 200 {
			t.Fatalf("%s: %d %v", d, st, out)
		}
	}

	br := f.browser(t)
	br.login("owner@acme.test", testPassword)
	rowRE := regexp.MustCompile(`data-testid="incident-link">([^<]+)</a>`)
	rows := func(query string) []string {
		t.Helper()
		res, body := br.get("/inbox" + query)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("/inbox%s: %d", query, res.StatusCode)
		}
		var ts []string
		for _, m := range rowRE.FindAllStringSubmatch(body, -1) {
			ts = append(ts, m[1])
		}
		sort.Strings(ts)
		return ts
	}
	zd := "ZeroDivisionError: division by zero"
	for query, want := range map[string][]string{
		"":                               {zd, zd},
		"?status=ALL":                    {"Closed one", "Ignored one", zd, zd},
		"?status=CLOSED":                 {"Closed one"},
		"?status=IGNORED":                {"Ignored one"},
		"?q=" + avg["short_id"].(string): {zd},
		"?q=" + strings.ToLower(ratio["short_id"].(string)): {zd},
		"?q=invoice.py":                 {zd},
		"?q=average":                    {zd},
		"?q=globex":                     {zd},
		"?q=CheckoutService&status=ALL": {"Closed one"},
		"?q=charge":                     nil, // the closed one, not unresolved
		"?q=no-such-thing-anywhere":     nil,
	} {
		if got := rows(query); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("/inbox%s: %q, want %q", query, got, want)
		}
	}
	// The short id finds exactly its incident, not the other of its title.
	_, body := br.get("/inbox?q=" + url.QueryEscape(avg["short_id"].(string)))
	if !strings.Contains(body, `data-testid="incident-culprit">average (app/stats.py:41)<`) || strings.Contains(body, "invoice.py") {
		t.Fatalf("short id search: %s", body)
	}
	// The default page: both ZeroDivisionErrors told apart by their
	// culprit, each with its level; the counts name what waits behind.
	_, body = br.get("/inbox")
	for _, want := range []string{
		`data-testid="incident-culprit">average (app/stats.py:41)<`,
		`data-testid="incident-culprit">ratio (app/billing/invoice.py:12)<`,
		`data-testid="level" data-level="error"`,
		`data-testid="count-unresolved">Unresolved · 2<`,
		`data-testid="count-all">All · 4<`,
		`data-status="CLOSED">closed · 1<`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("inbox lacks %s", want)
		}
	}
	if st, out := f.api(t, f.owner.Token, "GET", "/api/private/incidents?status=UNRESOLVED", nil); st != 200 || len(out["incidents"].([]any)) != 2 {
		t.Fatalf("API unresolved: %d %v", st, out)
	}
	if st, out := f.api(t, f.owner.Token, "GET", "/api/private/incidents", nil); st != 200 || len(out["incidents"].([]any)) != 4 {
		t.Fatalf("the API's default stays every status: %d %v", st, out)
	}
}
