package feed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"anvil/domain"
	"anvil/domain/card"
	"anvil/domain/event"
)

// ErrFeedStore marks a failure of the store while ingesting: the database
// refused, broke the connection or did not answer within StoreTimeout. The
// ingest answers it with 503 and Retry-After, and the sender repeats the
// whole batch — safe, because the dedupe key counts every event once.
var ErrFeedStore = errors.New("feed store unavailable")

// IngestResult is the answer to one request: every event of the body has
// exactly one verdict, its id echoed as the sender spelled it.
type IngestResult struct {
	Accepted []string          `json:"accepted"`
	Rejected []event.Rejection `json:"rejected"`
}

// prepared is an event that passed every per-event check and is ready to be
// stored.
type prepared struct {
	ev     event.Event
	key    string // CanonicalID: the event half of the dedupe key
	policy string
	fp     string
	row    copyRow   // its row of feed_events, payload included
	conn   uuid.UUID // the connection that sent it
}

// Ingest judges, scrubs and stores one request's events for a resolved
// sender, and groups the new ones into incidents — all before it returns, so
// the 202 that follows is a promise already kept.
//
// Per event, in this order: Validate; the binding of the token's project for
// the event's environment (exact, else '*'; none → no_binding, policy off →
// binding_disabled); user.ip_hash from clientAddr (the sender's value was
// never read); Scrub (redaction_failed); Fingerprint. A panic in any of it is
// that event's internal_error, not the batch's.
//
// Storage is one transaction for the whole batch, so either every accepted
// event is stored or none is. On a store failure the error wraps
// ErrFeedStore and the result holds no accepted events (nothing got
// through) and the rejections already decided.
func (f *Feed) Ingest(ctx context.Context, snd *FeedSender, clientAddr string, raws []json.RawMessage) (IngestResult, error) {
	b := event.RawBatch(raws)
	return f.IngestBatch(ctx, snd, clientAddr, &b)
}

// IngestBatch is Ingest for a request body event.SplitBatch has cut (and
// mostly decoded already).
func (f *Feed) IngestBatch(ctx context.Context, snd *FeedSender, clientAddr string, b *event.Batch) (IngestResult, error) {
	now := f.s.Now()
	res := IngestResult{Accepted: make([]string, 0, b.Len()), Rejected: []event.Rejection{}}
	evs := make([]prepared, 0, b.Len())
	// One sender, one address, one moment: one pseudonym for the request.
	ipHash := event.IPHash(clientAddr, now, snd.ConnectionID.String())
	for i := range b.Len() {
		p, rej := f.prepare(ctx, b, i, snd, ipHash)
		if rej != nil {
			res.Rejected = append(res.Rejected, *rej)
			continue
		}
		evs = append(evs, p)
	}
	if len(evs) == 0 {
		return res, nil
	}
	if err := f.combine(ctx, snd, evs, now); err != nil {
		return res, fmt.Errorf("%w: %w", ErrFeedStore, err)
	}
	if f.SyncFold {
		if _, err := f.FoldDeltas(ctx); err != nil {
			f.s.Log.Warn("feed: fold failed", "error", err)
		}
	}
	f.refreshCard(ctx, snd.ProjectID)
	for _, p := range evs {
		res.Accepted = append(res.Accepted, p.ev.EventID)
	}
	return res, nil
}

// prepare runs the per-event pipeline on element i of b.
func (f *Feed) prepare(ctx context.Context, b *event.Batch, i int, snd *FeedSender, ipHash string) (p prepared, rej *event.Rejection) {
	var id *string
	defer func() {
		if r := recover(); r != nil {
			f.s.Log.Error("feed: event pipeline panicked", "project_id", snd.ProjectID, "panic", fmt.Sprint(r))
			rej = &event.Rejection{EventID: id, ReasonCode: event.InternalError, Message: "the event could not be processed because of a fault on our side"}
		}
	}()
	ev, rej := b.Validate(i)
	if rej != nil {
		return p, rej
	}
	id = &ev.EventID
	policy, ok := snd.policyFor(ev.Environment)
	if !ok {
		return p, &event.Rejection{EventID: id, ReasonCode: event.NoBinding, Message: fmt.Sprintf("no binding for environment '%s'", ev.Environment)}
	}
	if policy == domain.PolicyOff {
		return p, &event.Rejection{EventID: id, ReasonCode: event.BindingDisabled, Message: fmt.Sprintf("the binding for environment '%s' has repair policy off; the event was not kept", ev.Environment)}
	}
	policy = domain.PolicyForLevel(policy, ev.Level) // warning and below never start a repair on their own
	ev.User.IPHash = ipHash
	if f.Symbolicate != nil {
		f.Symbolicate(ctx, snd.ProjectID, &ev)
	}
	if err := f.scrub(&ev); err != nil {
		return p, &event.Rejection{EventID: id, ReasonCode: event.RedactionFailed, Message: err.Error()}
	}
	key, fp := ev.CanonicalID(), event.Fingerprint(&ev)
	row, err := encodeEventRow(snd.OrgID, snd.ProjectID, snd.ConnectionID, key, fp, &ev)
	if err != nil {
		return p, &event.Rejection{EventID: id, ReasonCode: event.InternalError, Message: "the event could not be encoded for storage"}
	}
	return prepared{ev: ev, key: key, policy: policy, fp: fp, row: row, conn: snd.ConnectionID}, nil
}

// refreshCard asks for the project's card refresh once the batch has
// committed (its group counted the change in card_changes). Inside the
// batch the insert would need River's transaction, which the fast path
// does not use; and a card failure must never fail an ingest. The requests
// of concurrent batches coalesce into rounds at least card.RefreshGap apart;
// a request lost to a crash is caught by the periodic card sweep.
func (f *Feed) refreshCard(_ context.Context, projectID uuid.UUID) {
	f.cards.Request(projectID)
}

// maxCardRequests bounds the projects waiting for a request round.
const maxCardRequests = 10000

// requestCardRefreshes is one round of card-refresh requests.
func (f *Feed) requestCardRefreshes(ctx context.Context, ids []uuid.UUID) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, id := range ids {
		if err := card.QueueRefresh(ctx, f.s, id); err != nil {
			f.s.Log.Warn("feed: card refresh not enqueued; the sweep will catch up", "project_id", id, "error", err)
		}
	}
}

// A combiner stores the batches of one project that arrive while another
// of its batches is being stored together, in one transaction: a storm of
// one fault makes every batch update the same incident rows, and each
// transaction holds those row locks across its commit's flush, so storing
// them one by one would admit one batch per disk flush. Each sender still
// gets its answer only after the transaction that holds its events has
// committed (flat combining: the first waiting request does the work).
type combiner struct {
	mu    sync.Mutex
	queue map[uuid.UUID]*projectQueue
}

type projectQueue struct {
	pending []*combineJob
	leaders int
}

// take removes the first waiting batch.
func (q *projectQueue) take() *combineJob {
	j := q.pending[0]
	q.pending = q.pending[1:]
	return j
}

type combineJob struct {
	snd  *FeedSender
	evs  []prepared
	done chan error
}

// maxLeaders is how many groups of one project are stored at once. Their
// COPYs share the process's copySlots, so while groups COPY, the one
// before them locks, counts and commits, and the next forms from the
// batches arriving meanwhile.
const maxLeaders = 3

// copySlots is how many groups of the process COPY at once. A storm's
// rate is that of its COPYs (docs/feed.md, "The write path and its
// costs"): with one at a time, a core sat idle while all the requests
// waited for it; two side by side cost Postgres a little more per row (the
// same index pages) and admit about 4 % more events a second. More would
// only queue on those pages.
const copySlots = 2

// maxCombined bounds the events stored in one transaction.
const maxCombined = 1000

// errLead hands the lead of a project's queue to a waiting batch.
var errLead = errors.New("feed: lead the project's store queue")

// combine stores evs — alone or together with the project's other waiting
// batches — and returns once they are committed (or failed). Up to
// maxLeaders batches of a project lead at a time: a leader stores one group
// (its own batch first, then those waiting) and passes the lead on to the
// first batch still waiting, so no request works for others for long.
// Waiting is bounded by the store timeout of the groups ahead.
func (f *Feed) combine(ctx context.Context, snd *FeedSender, evs []prepared, now time.Time) error {
	job := &combineJob{snd: snd, evs: evs, done: make(chan error, 1)}
	c := &f.comb
	c.mu.Lock()
	if c.queue == nil {
		c.queue = map[uuid.UUID]*projectQueue{}
	}
	q := c.queue[snd.ProjectID]
	if q == nil {
		q = &projectQueue{}
		c.queue[snd.ProjectID] = q
	}
	lead := q.leaders < maxLeaders
	if lead {
		q.leaders++
	} else {
		q.pending = append(q.pending, job)
	}
	c.mu.Unlock()
	if !lead {
		if err := <-job.done; !errors.Is(err, errLead) {
			return err
		}
	}
	f.storeGroup(context.WithoutCancel(ctx), snd.ProjectID, q, job, now)
	return <-job.done
}

// storeGroup stores own and the batches waiting at the front of the
// project's queue in one transaction, answers them, and passes the lead to
// the next waiting batch, if any.
func (f *Feed) storeGroup(ctx context.Context, projectID uuid.UUID, q *projectQueue, own *combineJob, now time.Time) {
	sctx, cancel := context.WithTimeout(ctx, f.StoreTimeout)
	defer cancel()
	// The group forms once it may COPY: it takes every batch that arrived
	// while the group before it COPYed.
	var once sync.Once
	release := func() { once.Do(func() { <-f.copySlot }) }
	err := f.takeCopySlot(sctx)
	if err != nil {
		release = func() {}
	}
	c := &f.comb
	c.mu.Lock()
	group := []*combineJob{own}
	n := len(own.evs)
	for len(q.pending) > 0 && n+len(q.pending[0].evs) <= maxCombined {
		n += len(q.pending[0].evs)
		group = append(group, q.take())
	}
	c.mu.Unlock()
	all := make([]prepared, 0, n)
	for _, j := range group {
		all = append(all, j.evs...)
	}
	switch {
	case err != nil: // no copy slot within the store timeout
	case f.s.Pool != nil && !f.generalOnly:
		err = f.storeFast(sctx, planBatch(group[0].snd, all, now), release)
	default:
		release()
		err = errSlowStore
	}
	if errors.Is(err, errSlowStore) || errors.Is(err, errCopyConflict) {
		p := planBatch(group[0].snd, all, now)
		err = f.s.InTx(sctx, func(ctx context.Context, tx bun.Tx) error { return f.storeBatch(ctx, tx, p) })
	}
	for _, j := range group {
		j.done <- err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(q.pending) == 0 {
		q.leaders--
		if q.leaders == 0 {
			delete(c.queue, projectID)
		}
		return
	}
	q.take().done <- errLead
}

// takeCopySlot waits for one of the process's copy slots, at most until
// ctx ends.
func (f *Feed) takeCopySlot(ctx context.Context) error {
	select {
	case f.copySlot <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait to store: %w", ctx.Err())
	}
}
