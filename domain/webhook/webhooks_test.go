package webhook_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"anvil/domain"
	"anvil/domain/forge"
	"anvil/domain/run"
	"anvil/domain/secret"
	"anvil/domain/webhook"
)

const (
	shaA = "199eddf46df50de8d02e99bf1c5fdb4101338224"
	shaB = "a10867b14bb761a232cd80139fbd4c0d33264240"
	zero = "0000000000000000000000000000000000000000"
)

func boolp(b bool) *bool { return &b }

// webhook creates an enabled webhook and returns the service and the secret.
func (b *testBundle) webhook(t *testing.T, p *domain.Project, provider string) (*webhook.Webhooks, string) {
	t.Helper()
	w := webhook.NewWebhooks(b.Store, b.Queue)
	res, err := w.Put(context.Background(), b.Owner, p.ID, provider, webhook.WebhookInput{Enabled: boolp(true)})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Created || len(res.Secrets.Secret) != 64 {
		t.Fatalf("create: %+v", res)
	}
	return w, res.Secrets.Secret
}

func push(provider forge.Provider, id, branch, sha string) forge.Payload {
	return forge.Payload{Provider: provider, DeliveryID: id, Kind: forge.KindPush, Event: "push",
		Ref: "refs/heads/" + branch, Branch: branch, CommitSHA: sha, BeforeSHA: shaB}
}

// deliver verifies like the route does (the webhook's material) and
// delivers pl with that verification.
func deliver(ctx context.Context, w *webhook.Webhooks, projectID uuid.UUID, provider string, pl forge.Payload) (run.DeliveryResult, error) {
	m, err := w.VerificationMaterial(ctx, projectID, provider)
	if err != nil {
		return run.DeliveryResult{}, err
	}
	return w.Deliver(ctx, m.Verification(), pl)
}

func TestDeliverOutcomes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	p := b.Project(t, "hooks")
	w, _ := b.webhook(t, p, "github")
	b.webhook(t, p, "gitea")
	cases := []struct {
		name    string
		payload forge.Payload
		want    forge.Outcome
	}{
		{"push to default branch", push(forge.GitHub, "d-accept", "main", shaA), forge.OutcomeAccepted},
		{"push to another branch", push(forge.GitHub, "d-branch", "feature", shaA), forge.OutcomeIgnoredBranch},
		{"github ping", forge.Payload{Provider: forge.GitHub, DeliveryID: "d-ping", Kind: forge.KindPing, Event: "ping"}, forge.OutcomeIgnoredPing},
		{"gitea test push", forge.Payload{Provider: forge.Gitea, DeliveryID: "d-test", Kind: forge.KindPing, Event: "push",
			Ref: "refs/heads/main", Branch: "main", CommitSHA: zero, BeforeSHA: zero}, forge.OutcomeIgnoredPing},
		{"tag push", forge.Payload{Provider: forge.GitHub, DeliveryID: "d-tag", Kind: forge.KindTag, Event: "push", Ref: "refs/tags/v1", CommitSHA: shaA}, forge.OutcomeIgnoredEvent},
		{"branch delete", forge.Payload{Provider: forge.GitHub, DeliveryID: "d-del", Kind: forge.KindBranchDelete, Event: "push",
			Ref: "refs/heads/main", Branch: "main", CommitSHA: zero}, forge.OutcomeIgnoredEvent},
		{"gitea create", forge.Payload{Provider: forge.Gitea, DeliveryID: "d-create", Kind: forge.KindTag, Event: "create", Ref: "v1"}, forge.OutcomeIgnoredEvent},
		{"gitea delete", forge.Payload{Provider: forge.Gitea, DeliveryID: "d-gdel", Kind: forge.KindBranchDelete, Event: "delete", Ref: "feature"}, forge.OutcomeIgnoredEvent},
		{"other event", forge.Payload{Provider: forge.GitHub, DeliveryID: "d-issue", Kind: forge.KindOther, Event: "issues"}, forge.OutcomeIgnoredEvent},
	}
	for _, tc := range cases {
		res, err := deliver(ctx, w, p.ID, string(tc.payload.Provider), tc.payload)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if res.Outcome != tc.want || res.Replayed {
			t.Fatalf("%s: outcome %s (replayed %t), want %s", tc.name, res.Outcome, res.Replayed, tc.want)
		}
		if (res.RunID != nil) != (tc.want == forge.OutcomeAccepted) {
			t.Fatalf("%s: run id %v", tc.name, res.RunID)
		}
		if tc.want == forge.OutcomeAccepted {
			r := b.Run(t, *res.RunID)
			if r.CommitSHA == nil || *r.CommitSHA != shaA || r.Trigger != run.TriggerWebhook || r.Branch != "main" ||
				r.DeliveryID == nil || *r.DeliveryID != "d-accept" || r.Provider == nil || *r.Provider != "github" {
				t.Fatalf("accepted run: %+v", r)
			}
		}
	}
	ds, err := w.ListDeliveries(ctx, b.Owner, p.ID, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != len(cases) {
		t.Fatalf("ledger holds %d rows, want %d", len(ds), len(cases))
	}
	gh, _ := w.ListDeliveries(ctx, b.Owner, p.ID, "github", 0)
	if len(gh) != len(cases)-3 {
		t.Fatalf("github ledger holds %d rows", len(gh))
	}
	if n := countRows(t, b, "project_runs", "project_id = ?", p.ID); n != 1 {
		t.Fatalf("%d runs, want 1", n)
	}
}

func TestDuplicatesReplayWithoutReprocessing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	p := b.Project(t, "dupes")
	w, _ := b.webhook(t, p, "github")
	first := map[string]forge.Payload{
		"accepted":       push(forge.GitHub, "r-acc", "main", shaA),
		"ignored_branch": push(forge.GitHub, "r-br", "feature", shaA),
		"ignored_ping":   {Provider: forge.GitHub, DeliveryID: "r-ping", Kind: forge.KindPing, Event: "ping"},
		"ignored_event":  {Provider: forge.GitHub, DeliveryID: "r-ev", Kind: forge.KindOther, Event: "issues"},
	}
	runs := map[string]*uuid.UUID{}
	for want, pl := range first {
		res, err := deliver(ctx, w, p.ID, "github", pl)
		if err != nil || string(res.Outcome) != want {
			t.Fatalf("%s: %v %+v", want, err, res)
		}
		runs[want] = res.RunID
	}
	// A second delivery of each id, now carrying a push to the default
	// branch, replays the stored decision: no reprocessing, no new run.
	for want, pl := range first {
		again := push(forge.GitHub, pl.DeliveryID, "main", shaB)
		res, err := deliver(ctx, w, p.ID, "github", again)
		if err != nil {
			t.Fatal(err)
		}
		if string(res.Outcome) != want || !res.Replayed || (runs[want] == nil) != (res.RunID == nil) ||
			(res.RunID != nil && *res.RunID != *runs[want]) {
			t.Fatalf("replay of %s: %+v", want, res)
		}
	}
	if n := countRows(t, b, "project_runs", "project_id = ?", p.ID); n != 1 {
		t.Fatalf("%d runs after replays, want 1", n)
	}
	if n := countRows(t, b, "project_webhook_deliveries", "attempts = 2"); n != 4 {
		t.Fatalf("%d rows counted the duplicate", n)
	}
}

func TestQueueFullIsReevaluated(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	p := b.Project(t, "full")
	w, _ := b.webhook(t, p, "github")
	var queued []uuid.UUID
	for range run.MaxQueued {
		r, err := b.Queue.AcceptManual(ctx, b.Owner, p.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		queued = append(queued, r.ID)
	}
	pl := push(forge.GitHub, "qf-1", "main", shaA)
	res, err := deliver(ctx, w, p.ID, "github", pl)
	var de *domain.Error
	if !errors.Is(err, domain.ErrWebhookQueueFull) || !errors.As(err, &de) || de.Code != "project_queue_full" {
		t.Fatalf("full queue: %v", err)
	}
	if res.Outcome != forge.OutcomeQueueFull || res.RunID != nil {
		t.Fatalf("full queue result: %+v", res)
	}
	// Still full: re-evaluated, still queue_full.
	if _, err := deliver(ctx, w, p.ID, "github", pl); !errors.Is(err, domain.ErrWebhookQueueFull) {
		t.Fatalf("second attempt: %v", err)
	}
	ds, _ := w.ListDeliveries(ctx, b.Owner, p.ID, "github", 0)
	if len(ds) != 1 || ds[0].Outcome != "queue_full" || ds[0].RunID != nil || ds[0].Attempts != 2 {
		t.Fatalf("ledger after queue full: %+v", ds)
	}
	if _, err := b.Queue.RequestCancel(ctx, b.Owner, queued[len(queued)-1]); err != nil {
		t.Fatal(err)
	}
	res, err = deliver(ctx, w, p.ID, "github", pl)
	if err != nil || res.Outcome != forge.OutcomeAccepted || res.RunID == nil || res.Replayed {
		t.Fatalf("after freeing a slot: %v %+v", err, res)
	}
	ds, _ = w.ListDeliveries(ctx, b.Owner, p.ID, "github", 0)
	if ds[0].Outcome != "accepted" || ds[0].RunID == nil || *ds[0].RunID != *res.RunID || ds[0].Attempts != 3 {
		t.Fatalf("ledger after acceptance: %+v", ds[0])
	}
	// Accepted is terminal: a further resend replays it, even with room.
	if _, err := b.Queue.RequestCancel(ctx, b.Owner, queued[len(queued)-2]); err != nil {
		t.Fatal(err)
	}
	again, err := deliver(ctx, w, p.ID, "github", pl)
	if err != nil || !again.Replayed || again.RunID == nil || *again.RunID != *res.RunID {
		t.Fatalf("resend of accepted: %v %+v", err, again)
	}
	if n := countRows(t, b, "project_runs", "delivery_id = ?", "qf-1"); n != 1 {
		t.Fatalf("%d runs for the delivery", n)
	}
}

func TestTenConcurrentCopiesMakeOneRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.Project(t, "race")
	w, _ := b.webhook(t, p, "gitlab")
	pl := push(forge.GitLab, "same-id", "main", shaA)
	pl.Event = "Push Hook"
	var wg sync.WaitGroup
	start := make(chan struct{})
	results := make([]run.DeliveryResult, 10)
	errs := make([]error, 10)
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = deliver(context.Background(), w, p.ID, "gitlab", pl)
		}()
	}
	close(start)
	wg.Wait()
	replayed := 0
	for i := range 10 {
		if errs[i] != nil || results[i].Outcome != forge.OutcomeAccepted || results[i].RunID == nil || *results[i].RunID != *results[0].RunID {
			t.Fatalf("copy %d: %v %+v", i, errs[i], results[i])
		}
		if results[i].Replayed {
			replayed++
		}
	}
	if replayed != 9 {
		t.Fatalf("%d replays, want 9", replayed)
	}
	if n := countRows(t, b, "project_runs", "project_id = ?", p.ID); n != 1 {
		t.Fatalf("%d runs, want exactly 1", n)
	}
}

func TestWebhookCRUDRules(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	p := b.Project(t, "crud")
	w := webhook.NewWebhooks(b.Store, b.Queue)

	code := func(err error) string {
		var de *domain.Error
		if errors.As(err, &de) {
			return de.Code
		}
		return ""
	}
	// Create needs enabled; a brought secret must be sound; config is GitLab's.
	if _, err := w.Put(ctx, b.Owner, p.ID, "github", webhook.WebhookInput{}); code(err) != "missing_enabled" {
		t.Fatalf("missing enabled: %v", err)
	}
	if _, err := w.Put(ctx, b.Owner, p.ID, "github", webhook.WebhookInput{Enabled: boolp(true), Secret: strp("short")}); code(err) != "invalid_secret" || strings.Contains(err.Error(), "short") {
		t.Fatalf("short secret: %v", err)
	}
	if _, err := w.Put(ctx, b.Owner, p.ID, "github", webhook.WebhookInput{Enabled: boolp(true), Config: &webhook.WebhookConfigInput{SigningToken: boolp(true)}}); code(err) != "invalid_config" {
		t.Fatalf("signing token on github: %v", err)
	}
	if _, err := w.Put(ctx, b.Owner, p.ID, "bitbucket", webhook.WebhookInput{Enabled: boolp(true)}); !errors.Is(err, domain.ErrNotFound) || code(err) != "unknown_provider" {
		t.Fatalf("unknown provider: %v", err)
	}
	viewer := *b.Owner
	viewer.Role = domain.RoleViewer
	if _, err := w.Put(ctx, &viewer, p.ID, "github", webhook.WebhookInput{Enabled: boolp(true)}); !errors.Is(err, domain.ErrForbidden) {
		t.Fatalf("viewer: %v", err)
	}
	otherRes, err := b.Accounts.Bootstrap(ctx, "globex", "boss@globex.test", "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	other, _ := b.Accounts.Authenticate(ctx, otherRes.Token)
	if _, err := w.Put(ctx, other, p.ID, "github", webhook.WebhookInput{Enabled: boolp(true)}); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("other org: %v", err)
	}
	if n := countRows(t, b, "project_webhooks", "true"); n != 0 {
		t.Fatalf("refusals created %d webhooks", n)
	}

	mine := "my own webhook secret 123"
	res, err := w.Put(ctx, b.Owner, p.ID, "github", webhook.WebhookInput{Enabled: boolp(true), Secret: &mine})
	if err != nil || !res.Created || res.Secrets.Secret != mine {
		t.Fatalf("create with secret: %v %+v", err, res)
	}
	m, err := w.VerificationMaterial(ctx, p.ID, "github")
	if err != nil || string(m.Secrets.Secret) != mine || !m.Enabled {
		t.Fatalf("material: %v", err)
	}
	if s := m.String() + " " + m.GoString(); strings.Contains(s, mine) {
		t.Fatal("material prints its secret")
	}
	// Update: a secret is refused, enabled changes, nothing is returned.
	if _, err := w.Put(ctx, b.Owner, p.ID, "github", webhook.WebhookInput{Secret: strp("another secret of length")}); code(err) != "secret_not_updatable" || !strings.Contains(err.Error(), "rotate-secret") {
		t.Fatalf("secret in update: %v", err)
	}
	res, err = w.Put(ctx, b.Owner, p.ID, "github", webhook.WebhookInput{Enabled: boolp(false)})
	if err != nil || res.Created || res.Secrets.Secret != "" || res.Webhook.Enabled {
		t.Fatalf("disable: %v %+v", err, res)
	}
	// Disabled keeps its secret, but Deliver refuses and records nothing.
	if m, err := w.VerificationMaterial(ctx, p.ID, "github"); err != nil || m.Enabled || string(m.Secrets.Secret) != mine {
		t.Fatalf("disabled material: %v", err)
	}
	if _, err := deliver(ctx, w, p.ID, "github", push(forge.GitHub, "x", "main", shaA)); err != domain.ErrWebhookDisabled {
		t.Fatalf("disabled deliver: %v", err)
	}
	if n := countRows(t, b, "project_webhook_deliveries", "true"); n != 0 {
		t.Fatal("a disabled webhook recorded a delivery")
	}
	// Rotate: a new secret, the old one gone at once.
	rot, err := w.RotateSecret(ctx, b.Owner, p.ID, "github")
	if err != nil || rot.Secrets.Secret == "" || rot.Secrets.Secret == mine {
		t.Fatalf("rotate: %v", err)
	}
	if m, _ := w.VerificationMaterial(ctx, p.ID, "github"); string(m.Secrets.Secret) != rot.Secrets.Secret {
		t.Fatal("rotation did not replace the secret")
	}
	// List never carries secrets (the type has no field for them) and shows
	// all three providers.
	ws, err := w.List(ctx, b.Owner, p.ID)
	if err != nil || len(ws) != 3 || !ws[0].Configured || ws[0].Enabled || ws[1].Configured || ws[2].Configured {
		t.Fatalf("list: %v %+v", err, ws)
	}
	// GitLab signing token: generated once on request, kept on a repeat,
	// rotated with the secret, removed on request.
	gl, err := w.Put(ctx, b.Owner, p.ID, "gitlab", webhook.WebhookInput{Enabled: boolp(true), Config: &webhook.WebhookConfigInput{SigningToken: boolp(true)}})
	if err != nil || !strings.HasPrefix(gl.Secrets.SigningToken, "whsec_") || !gl.Webhook.Config.SigningToken {
		t.Fatalf("gitlab with signing token: %v %+v", err, gl)
	}
	again, err := w.Put(ctx, b.Owner, p.ID, "gitlab", webhook.WebhookInput{Config: &webhook.WebhookConfigInput{SigningToken: boolp(true)}})
	if err != nil || again.Secrets.SigningToken != "" {
		t.Fatalf("repeat signing token: %v %+v", err, again)
	}
	glRot, err := w.RotateSecret(ctx, b.Owner, p.ID, "gitlab")
	if err != nil || glRot.Secrets.SigningToken == "" || glRot.Secrets.SigningToken == gl.Secrets.SigningToken {
		t.Fatalf("gitlab rotate: %v %+v", err, glRot)
	}
	if m, _ := w.VerificationMaterial(ctx, p.ID, "gitlab"); m.Secrets.SigningToken != glRot.Secrets.SigningToken {
		t.Fatal("signing token not rotated")
	}
	off, err := w.Put(ctx, b.Owner, p.ID, "gitlab", webhook.WebhookInput{Config: &webhook.WebhookConfigInput{SigningToken: boolp(false)}})
	if err != nil || off.Webhook.Config.SigningToken {
		t.Fatalf("signing token off: %v", err)
	}
	if m, _ := w.VerificationMaterial(ctx, p.ID, "gitlab"); m.Secrets.SigningToken != "" {
		t.Fatal("signing token kept after turning it off")
	}
	// Delete: the row and its secret go; the route then says not configured,
	// and a delivery verified just before is refused by Deliver.
	re, err := w.Put(ctx, b.Owner, p.ID, "github", webhook.WebhookInput{Enabled: boolp(true)})
	if err != nil || re.Created {
		t.Fatalf("enable again: %v", err)
	}
	mBefore, err := w.VerificationMaterial(ctx, p.ID, "github")
	if err != nil {
		t.Fatal(err)
	}
	verifiedBeforeDelete := mBefore.Verification()
	if err := w.Delete(ctx, &viewer, p.ID, "github"); !errors.Is(err, domain.ErrForbidden) {
		t.Fatalf("viewer delete: %v", err)
	}
	if err := w.Delete(ctx, b.Owner, p.ID, "github"); err != nil {
		t.Fatal(err)
	}
	if err := w.Delete(ctx, b.Owner, p.ID, "github"); code(err) != "webhook_not_found" {
		t.Fatalf("second delete: %v", err)
	}
	if _, err := w.VerificationMaterial(ctx, p.ID, "github"); err != domain.ErrWebhookNotConfigured {
		t.Fatalf("deleted material: %v", err)
	}
	if _, err := w.Deliver(ctx, verifiedBeforeDelete, push(forge.GitHub, "y", "main", shaA)); err != domain.ErrWebhookNotConfigured {
		t.Fatalf("deleted deliver: %v", err)
	}
	if _, err := w.RotateSecret(ctx, b.Owner, p.ID, "github"); code(err) != "webhook_not_found" {
		t.Fatalf("rotate deleted: %v", err)
	}
	if n := countRows(t, b, "project_webhooks", "provider = 'github'"); n != 0 {
		t.Fatal("delete left the row")
	}
	if _, err := w.VerificationMaterial(ctx, uuid.New(), "github"); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("unknown project: %v", err)
	}
}

func TestWebhookSecretsSurviveKeyRotation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	keyA := make([]byte, 32)
	keyB := make([]byte, 32)
	for i := range keyB {
		keyA[i], keyB[i] = byte(i+1), byte(200-i)
	}
	services := func(cur, prev []byte) (*domain.Store, *webhook.Webhooks) {
		k, err := secret.NewKeyring(cur, prev)
		if err != nil {
			t.Fatal(err)
		}
		s := domain.NewStore(b.DB.Bun, k, nil)
		s.UseJobs(b.River)
		startStore(t, s)
		return s, webhook.NewWebhooks(s, newQueue(t, s))
	}
	_, wA := services(keyA, nil)
	p := b.Project(t, "keys")
	gh, err := wA.Put(ctx, b.Owner, p.ID, "github", webhook.WebhookInput{Enabled: boolp(true)})
	if err != nil {
		t.Fatal(err)
	}
	gl, err := wA.Put(ctx, b.Owner, p.ID, "gitlab", webhook.WebhookInput{Enabled: boolp(true), Config: &webhook.WebhookConfigInput{SigningToken: boolp(true)}})
	if err != nil {
		t.Fatal(err)
	}
	// The operator rotates: B is current, A still opens.
	storeBA, wBA := services(keyB, keyA)
	if m, err := wBA.VerificationMaterial(ctx, p.ID, "github"); err != nil || string(m.Secrets.Secret) != gh.Secrets.Secret {
		t.Fatalf("under B with previous A: %v", err)
	}
	n, err := storeBA.RotateSecrets(ctx)
	if err != nil || n != 3 {
		t.Fatalf("RotateSecrets: %d, %v (want 3: two secrets and a signing token)", n, err)
	}
	// Only B now.
	_, wB := services(keyB, nil)
	m, err := wB.VerificationMaterial(ctx, p.ID, "gitlab")
	if err != nil || string(m.Secrets.Secret) != gl.Secrets.Secret || m.Secrets.SigningToken != gl.Secrets.SigningToken {
		t.Fatalf("under B alone: %v", err)
	}
	if m, err := wB.VerificationMaterial(ctx, p.ID, "github"); err != nil || string(m.Secrets.Secret) != gh.Secrets.Secret {
		t.Fatalf("github under B alone: %v", err)
	}
	// And A alone no longer opens anything.
	_, wOld := services(keyA, nil)
	if _, err := wOld.VerificationMaterial(ctx, p.ID, "github"); !errors.Is(err, secret.ErrUnknownKey) {
		t.Fatalf("under A alone after rotation: %v", err)
	}
	// A sealed value moved to another row does not open there (AAD).
	if _, err := b.DB.Bun.NewRaw(`UPDATE project_webhooks SET secret_enc = (SELECT secret_enc FROM project_webhooks WHERE provider = 'gitlab') WHERE provider = 'github'`).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := wB.VerificationMaterial(ctx, p.ID, "github"); !errors.Is(err, secret.ErrCorrupt) {
		t.Fatalf("swapped secret: %v", err)
	}
}

func TestDeliveryRetention(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	p := b.Project(t, "old")
	w, _ := b.webhook(t, p, "github")
	if _, err := deliver(ctx, w, p.ID, "github", forge.Payload{Provider: forge.GitHub, DeliveryID: "old", Kind: forge.KindPing, Event: "ping"}); err != nil {
		t.Fatal(err)
	}
	b.Clock.Advance(48 * time.Hour)
	if _, err := deliver(ctx, w, p.ID, "github", forge.Payload{Provider: forge.GitHub, DeliveryID: "young", Kind: forge.KindPing, Event: "ping"}); err != nil {
		t.Fatal(err)
	}
	b.Clock.Advance(25 * time.Hour) // "old" is 73 h old, "young" 25 h
	// Past the window but not yet swept, an id is a new delivery again.
	res, err := deliver(ctx, w, p.ID, "github", push(forge.GitHub, "old", "main", shaA))
	if err != nil || res.Replayed || res.Outcome != forge.OutcomeAccepted {
		t.Fatalf("expired id: %v %+v", err, res)
	}
	b.Clock.Advance(73 * time.Hour)
	if _, err := deliver(ctx, w, p.ID, "github", forge.Payload{Provider: forge.GitHub, DeliveryID: "new", Kind: forge.KindPing, Event: "ping"}); err != nil {
		t.Fatal(err)
	}
	n, err := w.DeleteExpiredDeliveries(ctx)
	if err != nil || n != 2 {
		t.Fatalf("retention deleted %d, %v; want 2", n, err)
	}
	ds, _ := w.ListDeliveries(ctx, b.Owner, p.ID, "", 0)
	if len(ds) != 1 || ds[0].DeliveryID != "new" {
		t.Fatalf("left: %+v", ds)
	}
}

// TestDeliveryVerifiedWithARotatedSecretIsRefused: material cached by one
// process goes stale when another rotates the secret. A delivery verified
// with it is refused under the lock and records nothing; the stale copy is
// dropped, and the stored secret is used from then on.
func TestDeliveryVerifiedWithARotatedSecretIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	p := b.Project(t, "stale")
	w, first := b.webhook(t, p, "github")
	other := webhook.NewWebhooks(b.Store, b.Queue) // another process: its own cache

	if m, err := w.CachedVerificationMaterial(ctx, p.ID, "github"); err != nil || m.Cached() || string(m.Secrets.Secret) != first {
		t.Fatalf("first read: %v cached=%t", err, m.Cached())
	}
	rot, err := other.RotateSecret(ctx, b.Owner, p.ID, "github")
	if err != nil {
		t.Fatal(err)
	}
	stale, err := w.CachedVerificationMaterial(ctx, p.ID, "github")
	if err != nil || !stale.Cached() || string(stale.Secrets.Secret) != first {
		t.Fatalf("cached read: %v cached=%t", err, stale.Cached())
	}
	if _, err := w.Deliver(ctx, stale.Verification(), push(forge.GitHub, "stale-1", "main", shaA)); err != domain.ErrStaleMaterial {
		t.Fatalf("delivery verified with the rotated secret: %v", err)
	}
	if n := countRows(t, b, "project_webhook_deliveries", "true") + countRows(t, b, "project_runs", "true"); n != 0 {
		t.Fatalf("a stale verification recorded %d rows", n)
	}
	fresh, err := w.CachedVerificationMaterial(ctx, p.ID, "github")
	if err != nil || fresh.Cached() || string(fresh.Secrets.Secret) != rot.Secrets.Secret {
		t.Fatalf("after the refusal: %v cached=%t", err, fresh.Cached())
	}
	res, err := w.Deliver(ctx, fresh.Verification(), push(forge.GitHub, "stale-1", "main", shaA))
	if err != nil || res.Outcome != forge.OutcomeAccepted {
		t.Fatalf("with the stored secret: %v %+v", err, res)
	}
	// The same secret re-created elsewhere is sealed anew: still stale.
	cached, _ := w.CachedVerificationMaterial(ctx, p.ID, "github")
	mine := rot.Secrets.Secret
	if err := other.Delete(ctx, b.Owner, p.ID, "github"); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Put(ctx, b.Owner, p.ID, "github", webhook.WebhookInput{Enabled: boolp(true), Secret: &mine}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Deliver(ctx, cached.Verification(), push(forge.GitHub, "stale-2", "main", shaA)); err != domain.ErrStaleMaterial {
		t.Fatalf("verified before the webhook was re-created: %v", err)
	}
	// A process's own writes drop its cached copies at once.
	if _, err := w.CachedVerificationMaterial(ctx, p.ID, "github"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.RotateSecret(ctx, b.Owner, p.ID, "github"); err != nil {
		t.Fatal(err)
	}
	if m, _ := w.CachedVerificationMaterial(ctx, p.ID, "github"); m.Cached() {
		t.Fatal("this process's rotation left its cached copy")
	}
	// Nothing unverified is delivered.
	var de *domain.Error
	if _, err := w.Deliver(ctx, webhook.Verification{}, push(forge.GitHub, "stale-3", "main", shaA)); !errors.As(err, &de) || de.Code != "unverified_delivery" {
		t.Fatalf("zero verification: %v", err)
	}
}
