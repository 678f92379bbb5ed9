package run

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"anvil/domain"
	"anvil/domain/internal/mask"
)

// DefaultMaxLogBytes bounds one run's log.
const DefaultMaxLogBytes = 10 << 20

// LogChunk is one stored piece of a run's log.
type LogChunk struct {
	Seq  int
	Body string
	// Offset is when the chunk was stored, in seconds since the run was
	// picked up by its executor (its queueing while it had none).
	Offset float64 `bun:"offset_seconds"`
	// Step is the index of the pipeline step that wrote the chunk; nil for
	// anvil's narration of the run.
	Step *int
}

// Logs stores and reads run logs in ordered chunks.
type Logs struct {
	s   *domain.Store
	max int64
}

// NewLogs builds the service; max bounds each run's log (≤ 0: the default).
func NewLogs(s *domain.Store, max int64) *Logs {
	if max <= 0 {
		max = DefaultMaxLogBytes
	}
	return &Logs{s: s, max: max}
}

// Chunks returns a run's chunks after seq (0: from the start).
func (l *Logs) Chunks(ctx context.Context, runID uuid.UUID, after int) ([]LogChunk, error) {
	var out []LogChunk
	err := l.s.DB.NewRaw(`SELECT c.seq, c.body, c.step,
			GREATEST(0, EXTRACT(EPOCH FROM c.created_at - COALESCE(r.claimed_at, r.queued_at)))::float8 AS offset_seconds
		FROM run_log_chunks c JOIN project_runs r ON r.id = c.run_id
		WHERE c.run_id = ? AND c.seq > ? ORDER BY c.seq`, runID, after).Scan(ctx, &out)
	return out, err
}

// Text returns the whole log of a run of the organisation.
func (l *Logs) Text(ctx context.Context, orgID, runID uuid.UUID) (string, error) {
	var ok bool
	if err := l.s.DB.NewRaw(`SELECT EXISTS (SELECT 1 FROM project_runs r JOIN `+domain.LiveProjects+` p ON p.id = r.project_id
		WHERE r.id = ? AND r.org_id = ?)`, runID, orgID).Scan(ctx, &ok); err != nil {
		return "", err
	}
	if !ok {
		return "", domain.NotFound("run")
	}
	chunks, err := l.Chunks(ctx, runID, 0)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, c := range chunks {
		b.WriteString(c.Body)
	}
	return b.String(), nil
}

// LogWriter appends a run's output: it buffers, flushes every 200 ms or
// 32 KiB as one chunk a stream (with a live "log" event), and stops at the
// bound with a visible truncation line. The run's own narration is one
// stream; each pipeline step writes its own (Step), so parallel steps never
// interleave within a chunk and a step's log reads alone. Safe for
// concurrent writes.
type LogWriter struct {
	l       *Logs
	run     *Run
	mu      sync.Mutex
	streams []*stream // [0]: the run's narration (step NULL)
	// narration is streams[0], kept apart: Step grows streams under mu
	// while Write, which takes no lock to find it, may run at once.
	narration *stream
	pending   int64 // bytes buffered in every stream
	seq       int
	written   int64
	truncated bool
	values    []string // the secrets themselves, for the patch (SavePatch) and new streams
	err       error
	stop      chan struct{}
	done      chan struct{}
}

// stream is one step's (or the narration's) buffer and masker: a masker
// holds a possible prefix of a secret across writes, so each stream needs
// its own.
type stream struct {
	step *int
	buf  bytes.Buffer
	mask *mask.Masker
}

// Writer starts a log writer for a run. Close flushes and stops it.
func (l *Logs) Writer(ctx context.Context, r *Run) *LogWriter {
	narration := &stream{}
	w := &LogWriter{l: l, run: r, streams: []*stream{narration}, narration: narration, stop: make(chan struct{}), done: make(chan struct{})}
	_ = l.s.DB.NewRaw(`SELECT COALESCE(max(seq), 0), COALESCE(sum(octet_length(body)), 0) FROM run_log_chunks WHERE run_id = ?`, r.ID).Scan(ctx, &w.seq, &w.written)
	go func() {
		defer close(w.done)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-t.C:
				w.Flush(context.WithoutCancel(ctx))
			}
		}
	}()
	return w
}

const truncatedLine = "\n[anvil] log truncated: this run's output exceeded %d bytes; the rest was discarded\n"

// Mask makes the writer replace every occurrence of values (and of their
// base64 and URL-encoded forms) with *** before anything is buffered, so
// that no value reaches the database or a live stream. Call it before the
// first write that could hold one.
func (w *LogWriter) Mask(values []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(values) > 0 {
		w.values = values
		for _, s := range w.streams {
			s.mask = mask.New(values)
		}
	}
}

// MaskString returns s with the run's secrets masked as the log masks
// them, for what the run leaves outside its log (the hosts and reasons of
// its Network section, docs/network.md).
func (w *LogWriter) MaskString(s string) string {
	w.mu.Lock()
	values := w.values
	w.mu.Unlock()
	if len(values) == 0 || s == "" {
		return s
	}
	m := mask.New(values)
	out := m.Write([]byte(s))
	return string(append(out, m.Flush()...))
}

// Step returns the writer of one pipeline step's log (its index in the
// run's plan), masked as the run's log is.
func (w *LogWriter) Step(idx int) io.Writer {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.streams {
		if s.step != nil && *s.step == idx {
			return stepWriter{w, s}
		}
	}
	s := &stream{step: &idx}
	if len(w.values) > 0 {
		s.mask = mask.New(w.values)
	}
	w.streams = append(w.streams, s)
	return stepWriter{w, s}
}

// EndStep releases what a step's masker held back (a possible prefix of a
// secret) and stores every buffer, so that the narration of the step's end
// follows its last output in the log.
func (w *LogWriter) EndStep(ctx context.Context, idx int) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.streams {
		if s.step != nil && *s.step == idx && s.mask != nil {
			w.writeLocked(s, s.mask.Flush())
		}
	}
	return w.flushLocked(ctx)
}

type stepWriter struct {
	w *LogWriter
	s *stream
}

func (sw stepWriter) Write(p []byte) (int, error) { return sw.w.write(sw.s, p) }

// Write buffers p into the run's narration.
func (w *LogWriter) Write(p []byte) (int, error) { return w.write(w.narration, p) }

func (w *LogWriter) write(s *stream, p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s.mask != nil {
		w.writeLocked(s, s.mask.Write(p))
	} else {
		w.writeLocked(s, p)
	}
	return len(p), nil
}

// writeLocked buffers p (masked already), up to the log's bound.
func (w *LogWriter) writeLocked(s *stream, p []byte) {
	if w.truncated {
		return
	}
	room := w.l.max - w.written - w.pending
	if int64(len(p)) > room {
		cut := p[:max(room, 0)]
		for len(cut) > 0 && !utf8.Valid(cut) {
			cut = cut[:len(cut)-1]
		}
		before := s.buf.Len()
		s.buf.Write(cut)
		fmt.Fprintf(&s.buf, truncatedLine, w.l.max)
		w.pending += int64(s.buf.Len() - before)
		w.truncated = true
		return
	}
	s.buf.Write(p)
	w.pending += int64(len(p))
	if s.buf.Len() >= 32<<10 {
		_ = w.flushLocked(context.Background()) // a failed flush keeps the buffer; Close reports it
	}
}

// Printf writes one line of anvil's own narration into the log.
func (w *LogWriter) Printf(format string, args ...any) {
	fmt.Fprintf(w, "[anvil] "+format+"\n", args...)
}

// Flush stores what is buffered.
func (w *LogWriter) Flush(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.flushLocked(ctx)
}

func (w *LogWriter) flushLocked(ctx context.Context) error { return w.flush(ctx, false) }

// flush stores each stream's buffer as one chunk. Unless final, a trailing
// partial UTF-8 sequence waits for the next write (Postgres text must be
// valid).
func (w *LogWriter) flush(ctx context.Context, final bool) error {
	type piece struct {
		s    *stream
		text string
		used int
	}
	var pieces []piece
	for _, s := range w.streams {
		if s.buf.Len() == 0 {
			continue
		}
		body := s.buf.Bytes()
		keep := 0
		if !final && !w.truncated {
			for keep < 4 && keep < len(body) && !utf8.Valid(body[:len(body)-keep]) {
				keep++
			}
			if keep == 4 || keep == len(body) {
				keep = 0
			}
		}
		text := strings.ToValidUTF8(string(body[:len(body)-keep]), "\uFFFD")
		text = strings.ReplaceAll(text, "\x00", "")
		pieces = append(pieces, piece{s, text, len(body) - keep})
	}
	if len(pieces) == 0 {
		return w.err
	}
	seq := w.seq
	err := w.l.s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		for _, p := range pieces {
			seq++
			if _, err := tx.NewRaw(`INSERT INTO run_log_chunks (run_id, seq, body, step) VALUES (?, ?, ?, ?)`, w.run.ID, seq, p.text, p.s.step).Exec(ctx); err != nil {
				return err
			}
		}
		ev, _ := json.Marshal(domain.LiveEvent{Kind: "log", OrgID: w.run.OrgID, ProjectID: w.run.ProjectID, RunID: w.run.ID})
		return domain.Notify(ctx, tx, string(ev))
	})
	if err != nil {
		w.err = fmt.Errorf("store log of run %s: %w", w.run.ID, err)
		return w.err
	}
	w.seq = seq
	for _, p := range pieces {
		w.written += int64(len(p.text))
		w.pending -= int64(p.used)
		rest := append([]byte(nil), p.s.buf.Bytes()[p.used:]...)
		p.s.buf.Reset()
		p.s.buf.Write(rest)
	}
	return nil
}

// Close flushes and stops the writer.
func (w *LogWriter) Close(ctx context.Context) error {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.streams {
		if s.mask != nil {
			w.writeLocked(s, s.mask.Flush())
		}
	}
	return w.flush(ctx, true)
}
