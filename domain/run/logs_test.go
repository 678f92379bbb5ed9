package run_test

import (
	"context"
	"strings"
	"testing"

	"anvil/domain/run"
)

func TestLogWriterKeepsOrderAndBoundsTheLog(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	p := b.Project(t, "logs")
	r, err := b.Queue.AcceptManual(ctx, b.Owner, p.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	logs := run.NewLogs(b.Store, 4096)
	w := logs.Writer(ctx, r)
	var want strings.Builder
	for i := 0; i < 40; i++ {
		line := "line " + itoa(i) + " ünïcödé\n"
		want.WriteString(line)
		w.Write([]byte(line))
		if i%7 == 0 {
			if err := w.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := logs.Text(ctx, b.Owner.OrgID, r.ID)
	if err != nil || got != want.String() {
		t.Fatalf("log %q, want %q (%v)", got, want.String(), err)
	}
	// Past the bound: a visible truncation line, then nothing more.
	w = logs.Writer(ctx, r)
	w.Write([]byte(strings.Repeat("x", 8000)))
	w.Write([]byte("after the cut\n"))
	w.Close(ctx)
	got, _ = logs.Text(ctx, b.Owner.OrgID, r.ID)
	if len(got) > 4096+200 || !strings.Contains(got, "log truncated") || strings.Contains(got, "after the cut") {
		t.Fatalf("bounded log (%d bytes) ends %q", len(got), got[len(got)-120:])
	}
	// Another organisation cannot read it.
	if _, err := logs.Text(ctx, [16]byte{1}, r.ID); err == nil {
		t.Fatal("log readable without the organisation")
	}
}
