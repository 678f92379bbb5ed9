package feed_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"anvil/domain"
	"anvil/domain/feed"
	"anvil/domain/incident"
	"anvil/domain/internal/difftest"
	"anvil/domain/project"
)

// TestFeedStoreFastEqualsGeneral holds the feed's fast store (storeFast)
// to its general path (storeBatch): the same batches — new events and
// incidents, resends whole and partial, an id spelled twice, regressions,
// an ignored incident, the auto policy's repair request, and storms of one
// new fault in concurrent batches — must leave the same events, incidents,
// transitions, card changes and River jobs (repair dispatches, alerts,
// card refreshes) whichever path stored them.
func TestFeedStoreFastEqualsGeneral(t *testing.T) {
	t.Parallel()
	difftest.Run(t, 8, feedSeam, feedScript)
}

// feedSeam sends the general bundle's feed down storeBatch always and
// counts every bundle's groups by the path they looked their incidents up
// on.
func feedSeam(b *difftest.Bundle, general bool) {
	if general {
		b.SV.Feed.TakeGeneralPath()
	}
	b.SV.Feed.SetAfterLookup(func(general bool) {
		if general {
			b.Lookups[1].Add(1)
		} else {
			b.Lookups[0].Add(1)
		}
	})
}

// feedRun is the feed script's state in one bundle.
type feedRun struct {
	*difftest.Bundle
	proj   *domain.Project
	sender *feed.FeedSender
	events []string
}

// ev is the script's event name with an environment, a title and a
// release; spelled upper-case when upper.
func (f *feedRun) ev(name, env, title, release string, upper bool) json.RawMessage {
	if !slices.Contains(f.events, name) {
		f.events = append(f.events, name)
	}
	id := difftest.EventID(name)
	if upper {
		id = strings.ToUpper(id)
	}
	m := map[string]any{"schema_version": "1.0", "event_id": id, "timestamp": difftest.Epoch.Add(-time.Minute).Format("2006-01-02T15:04:05Z07:00"),
		"title": title, "level": "error", "environment": env, "service": "api", "sdk": map[string]any{"name": "t"},
		"exception": map[string]any{"type": "E" + strings.ReplaceAll(title, "-", ""), "message": "boom"}}
	if release != "" {
		m["release"] = release
	}
	raw, _ := json.Marshal(m)
	return raw
}

// e is a plain event: no release, spelled as generated.
func (f *feedRun) e(name, env, title string) json.RawMessage {
	return f.ev(name, env, title, "", false)
}

// ingest sends one batch and returns its answer with ids as names.
func (f *feedRun) ingest(t *testing.T, batch ...json.RawMessage) string {
	t.Helper()
	res, err := f.SV.Feed.Ingest(context.Background(), f.sender, "127.0.0.1", batch)
	if err != nil {
		t.Fatalf("%s: ingest: %v", f.Name, err)
	}
	name := func(id string) string {
		for _, e := range f.events {
			switch id {
			case difftest.EventID(e):
				return e
			case strings.ToUpper(difftest.EventID(e)):
				return strings.ToUpper(e)
			}
		}
		return id
	}
	var acc []string
	for _, id := range res.Accepted {
		acc = append(acc, name(id))
	}
	var rej []string
	for _, r := range res.Rejected {
		id := "?"
		if r.EventID != nil {
			id = name(*r.EventID)
		}
		rej = append(rej, id+":"+r.ReasonCode)
	}
	return fmt.Sprintf("accepted %v rejected %v", acc, rej)
}

// send ingests a batch at the script's next instant and records its answer.
func (f *feedRun) send(t *testing.T, what string, batch ...json.RawMessage) {
	t.Helper()
	f.Step()
	f.Record("%s: %s", what, f.ingest(t, batch...))
}

// storm sends the batches at once, each in its own request, and records
// their answers (in no particular order: sorted).
func (f *feedRun) storm(t *testing.T, what string, batches ...[]json.RawMessage) {
	t.Helper()
	f.Step()
	answers := make([]string, len(batches))
	var mu sync.Mutex
	var failed []error
	fns := make([]func(), len(batches))
	for i, batch := range batches {
		fns[i] = func() {
			res, err := f.SV.Feed.Ingest(context.Background(), f.sender, "127.0.0.1", batch)
			if err != nil {
				mu.Lock()
				failed = append(failed, err)
				mu.Unlock()
				return
			}
			answers[i] = fmt.Sprintf("%d accepted, %d rejected", len(res.Accepted), len(res.Rejected))
		}
	}
	difftest.Parallel(fns...)
	if len(failed) > 0 {
		t.Fatalf("%s: %s: %v", f.Name, what, failed)
	}
	slices.Sort(answers)
	f.Record("%s: %v", what, answers)
}

// decide applies a person's decision to the incident of an event.
func (f *feedRun) decide(t *testing.T, eventName, decision string) {
	t.Helper()
	f.Step()
	var id uuid.UUID
	if err := f.DB.Bun.NewRaw(`SELECT incident_id FROM feed_events WHERE event_id_key = ?`, difftest.EventID(eventName)).
		Scan(context.Background(), &id); err != nil {
		t.Fatalf("%s: the incident of %s: %v", f.Name, eventName, err)
	}
	inc, err := f.SV.Incidents.Decide(context.Background(), f.Owner, id, decision)
	if err != nil {
		t.Fatalf("%s: %s the incident of %s: %v", f.Name, decision, eventName, err)
	}
	f.Record("%s the incident of %s: %s", decision, eventName, inc.Status)
}

// feedScript is the feed's inputs; it returns the names of its events.
func feedScript(t *testing.T, b *difftest.Bundle) []string {
	ctx := context.Background()
	f := &feedRun{Bundle: b}
	var err error
	f.proj, err = b.SV.Projects.Create(ctx, b.Owner, project.ProjectInput{Slug: strp("shop"), RepoURL: strp("https://git.example/shop.git"),
		DefaultBranch: strp("main"), RunCommand: strp("make test"), RepairCommand: strp("./fix.sh")})
	if err != nil {
		t.Fatal(err)
	}
	for env, policy := range map[string]string{"production": domain.PolicyApprove, "staging": domain.PolicyObserve,
		"canary": domain.PolicyAuto, "muted": domain.PolicyOff, "*": domain.PolicyObserve} {
		if _, err := b.SV.Feed.PutBinding(ctx, b.Owner, f.proj.ID, env, policy); err != nil {
			t.Fatal(err)
		}
	}
	_, tok, err := b.SV.Feed.CreateConnection(ctx, b.Owner, f.proj.ID, "api")
	if err != nil {
		t.Fatal(err)
	}
	if f.sender, err = b.SV.Feed.Authenticate(ctx, tok); err != nil {
		t.Fatal(err)
	}

	// New incidents in every policy but auto, and a refusal.
	f.send(t, "new", f.e("e1", "production", "boom"), f.e("e2", "production", "boom"), f.e("e3", "staging", "slow"),
		f.e("e4", "dev", "dev-err"), f.e("e5", "muted", "hush"))
	// More of a known incident, with a release.
	f.send(t, "known", f.ev("e6", "production", "boom", "v2", false))
	// A whole resend: every event stored already.
	f.send(t, "resend", f.e("e1", "production", "boom"), f.ev("e6", "production", "boom", "v2", false))
	// A partial resend, the old id spelled upper-case, with a new incident.
	f.send(t, "partial resend", f.ev("e2", "production", "boom", "", true), f.e("e7", "production", "boom"),
		f.ev("e8", "staging", "fresh", "v3", false))
	// One id twice in a batch; then two spellings of a new id (the first
	// is stored).
	f.send(t, "twice", f.e("e9", "staging", "slow"), f.e("e9", "staging", "slow"), f.e("e10", "dev", "dev-err"))
	f.send(t, "two spellings", f.ev("e11", "staging", "fresh", "v4", true), f.ev("e11", "staging", "fresh", "v5", false))
	// The auto policy: the new incident is queued and its repair requested.
	f.send(t, "auto", f.e("e12", "canary", "canary-crash"), f.e("e13", "staging", "slow"))
	// Regressions: a closed incident gets a new event, under observe, auto
	// and approve.
	f.decide(t, "e3", incident.DecisionClose)
	f.send(t, "regression (observe)", f.e("e14", "staging", "slow"))
	f.decide(t, "e12", incident.DecisionClose)
	f.send(t, "regression (auto)", f.e("e15", "canary", "canary-crash"))
	f.decide(t, "e1", incident.DecisionClose)
	f.send(t, "regression (approve)", f.ev("e16", "production", "boom", "v6", false), f.e("e17", "production", "boom"))
	// An ignored incident only counts.
	f.decide(t, "e4", incident.DecisionIgnore)
	f.send(t, "ignored", f.e("e18", "dev", "dev-err"), f.e("e19", "dev", "dev-err"))

	// Storms: one new fault in six concurrent batches, created once; the
	// same in an auto environment (one repair request); then the storm
	// resent at once. The last event of each incident, sent after the
	// storm, makes the incidents' latest event one the script decides.
	storm := func(prefix, env, title string) [][]json.RawMessage {
		var out [][]json.RawMessage
		for i := range 6 {
			out = append(out, []json.RawMessage{f.e(fmt.Sprintf("%s%d", prefix, i), env, title),
				f.e(fmt.Sprintf("%s%d-second", prefix, i), "staging", title+"-too")})
		}
		return out
	}
	stormA := storm("a", "production", "storm")
	f.storm(t, "storm (approve, observe)", stormA...)
	f.storm(t, "storm (auto, observe)", storm("b", "canary", "canary-storm")...)
	f.storm(t, "another storm (approve, observe)", storm("d", "production", "surge")...)
	f.storm(t, "storm resent", stormA...)
	f.storm(t, "storm, known", storm("c", "production", "storm")...)
	f.send(t, "after the storms", f.e("last-a", "production", "storm"), f.e("last-a2", "staging", "storm-too"),
		f.e("last-b", "canary", "canary-storm"), f.e("last-b2", "staging", "canary-storm-too"),
		f.e("last-d", "production", "surge"), f.e("last-d2", "staging", "surge-too"))
	// A batch of everything at once: a resend, known incidents, a new one
	// queued by auto.
	f.send(t, "mixed", f.e("a0", "production", "storm"), f.e("m1", "staging", "slow"), f.e("m2", "canary", "canary-late"),
		f.e("m3", "dev", "dev-err"), f.e("m4", "muted", "hush"))

	// The script must have done what it says, on either path.
	var incidents, events, dispatches, alerts int
	if err := b.DB.Bun.NewRaw(`SELECT (SELECT count(*) FROM incidents), (SELECT count(*) FROM feed_events),
		(SELECT count(*) FROM river_job WHERE kind = 'dispatch_repair'), (SELECT count(*) FROM river_job WHERE kind = 'deliver_alert')`).
		Scan(ctx, &incidents, &events, &dispatches, &alerts); err != nil {
		t.Fatal(err)
	}
	if incidents != 12 || dispatches < 3 || alerts == 0 {
		t.Errorf("%s: %d incidents, %d events, %d repair dispatches, %d alerts: the script went wrong", b.Name, incidents, events, dispatches, alerts)
	}
	return f.events
}
