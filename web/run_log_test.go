package web_test

import (
	"context"
	"encoding/base64"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestRunLogMaskedInTheStreamAndRawInTheDownload: a run's log written with
// its project's secret masked — the value printed whole, split across two
// writes with a flush between them, base64- and URL-encoded — reaches the
// live stream (what was stored before the viewer joined and what comes
// after), the API and the raw download as *** only. The download is the
// log as stored: text/plain, colour codes and markup as bytes, never HTML;
// another organisation gets a 404.
func TestRunLogMaskedInTheStreamAndRawInTheDownload(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	const secret = "s3cr3t/Deploy+Key&v=42"
	_, p := b.api(t, b.owner.Token, "POST", "/api/private/projects", validProject("masked"))
	pid := uuid.MustParse(p["id"].(string))
	owner, _ := b.accounts.Authenticate(ctx, b.owner.Token)
	r, err := b.queue.AcceptManual(ctx, owner, pid, "")
	if err != nil {
		t.Fatal(err)
	}
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)

	w := b.logs.Writer(ctx, r)
	w.Mask([]string{secret})
	w.Write([]byte("\x1b[31mred\x1b[0m <b>bold?</b>\nwhole: " + secret + "\n"))
	w.Flush(ctx)
	stream := b.stream(t, br, "run="+r.ID.String()+"&after=0")
	w.Write([]byte("split: " + secret[:9]))
	w.Flush(ctx) // the first half may not be stored alone
	w.Write([]byte(secret[9:] + "\n"))
	w.Write([]byte("b64: " + base64.StdEncoding.EncodeToString([]byte(secret)) + "\n"))
	w.Write([]byte("url: " + url.QueryEscape(secret) + " " + url.PathEscape(secret) + "\n"))
	w.Write([]byte("end of log\n"))
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}

	var streamed strings.Builder
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(streamed.String(), "end of log") {
		if time.Now().After(deadline) {
			t.Fatalf("the stream never reached the end of the log: %q", streamed.String())
		}
		name, data := stream.next(10 * time.Second)
		if name == "eof" {
			t.Fatal("stream ended")
		}
		if name == "log" {
			streamed.WriteString(data)
		}
	}
	_, api := br.get("/api/private/runs/" + r.ID.String() + "/logs")
	res, raw := br.get("/runs/" + r.ID.String() + "/log.txt")
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("raw log: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	forms := []string{secret, secret[:9], secret[9:], base64.StdEncoding.EncodeToString([]byte(secret)), url.QueryEscape(secret), url.PathEscape(secret)}
	for what, text := range map[string]string{"stream": streamed.String(), "API": api, "download": raw} {
		for _, f := range forms {
			if strings.Contains(text, f) {
				t.Errorf("the %s shows %q", what, f)
			}
		}
		if strings.Count(text, "***") < 5 {
			t.Errorf("the %s masks fewer than five values: %q", what, text)
		}
	}
	if !strings.HasPrefix(raw, "\x1b[31mred\x1b[0m <b>bold?</b>\nwhole: ***\nsplit: ***\n") || !strings.HasSuffix(raw, "end of log\n") {
		t.Errorf("the download is not the log as stored: %q", raw)
	}
	if strings.Contains(streamed.String(), "<b>") || strings.Contains(streamed.String(), "\x1b") {
		t.Errorf("the stream carries markup or escape codes of the log: %q", streamed.String())
	}

	if _, err := b.accounts.Bootstrap(ctx, "globex", "x@globex.test", testPassword); err != nil {
		t.Fatal(err)
	}
	br2 := b.browser(t)
	br2.login("x@globex.test", testPassword)
	if res, _ := br2.get("/runs/" + r.ID.String() + "/log.txt"); res.StatusCode != http.StatusNotFound {
		t.Errorf("another organisation's download: %d", res.StatusCode)
	}
}

// readerSees is what a person reads of rendered log HTML: the text without
// markup, entities decoded.
func readerSees(page string) string {
	return html.UnescapeString(regexp.MustCompile(`<[^>]*>`).ReplaceAllString(page, ""))
}

// terminalSees is what a terminal shows of the raw download (cat log.txt):
// escape sequences and control characters take no room.
func terminalSees(raw string) string {
	raw = regexp.MustCompile("\x1b\\[[0-9;?]*[ -/]*[@-~]").ReplaceAllString(raw, "")
	return regexp.MustCompile("[\x00-\x08\x0b-\x1f\x7f]").ReplaceAllString(raw, "")
}

// TestRunLogMasksSecretsSplitByColourAndNUL: a secret the command printed
// split by colour codes (git diff --color-words, grep --color=always) or by
// a NUL — which the page's renderer and the store drop, joining the parts —
// is *** on the run page, in the live stream and in the raw download, also
// when the parts arrive in two writes; the colours stay.
func TestRunLogMasksSecretsSplitByColourAndNUL(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	const secret = "s3cr3t/Deploy+Key&v=42"
	_, p := b.api(t, b.owner.Token, "POST", "/api/private/projects", validProject("colour-masked"))
	pid := uuid.MustParse(p["id"].(string))
	owner, _ := b.accounts.Authenticate(ctx, b.owner.Token)
	r, err := b.queue.AcceptManual(ctx, owner, pid, "")
	if err != nil {
		t.Fatal(err)
	}
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)

	w := b.logs.Writer(ctx, r)
	w.Mask([]string{secret})
	stream := b.stream(t, br, "run="+r.ID.String()+"&after=0")
	w.Write([]byte("diff: -old \x1b[32m" + secret[:7] + "\x1b[m\x1b[32m" + secret[7:] + "\x1b[m\n"))
	w.Write([]byte("grep: DEPLOY=\x1b[01;31m\x1b[K" + secret[:3] + "\x1b[m\x1b[K\x1b[01;31m\x1b[K" + secret[3:] + "\x1b[m\x1b[K\n"))
	w.Write([]byte("nul: " + secret[:10] + "\x00" + secret[10:] + "\n"))
	w.Write([]byte("split: " + secret[:5] + "\x1b[3"))
	w.Flush(ctx) // the parts, and the colour code, cut across writes and a flush
	w.Write([]byte("4m" + secret[5:] + "\x1b[0m\n"))
	w.Write([]byte("end of log\n"))
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}

	var streamed strings.Builder
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(streamed.String(), "end of log") {
		if time.Now().After(deadline) {
			t.Fatalf("the stream never reached the end of the log: %q", streamed.String())
		}
		name, data := stream.next(10 * time.Second)
		if name == "eof" {
			t.Fatal("stream ended")
		}
		if name == "log" {
			streamed.WriteString(data)
		}
	}
	res, page := br.get("/runs/" + r.ID.String())
	if res.StatusCode != http.StatusOK || !strings.Contains(page, "end of log") {
		t.Fatalf("run page: %d", res.StatusCode)
	}
	_, raw := br.get("/runs/" + r.ID.String() + "/log.txt")
	for what, text := range map[string]string{"run page": readerSees(page), "stream": readerSees(streamed.String()), "download": terminalSees(raw)} {
		if strings.Contains(text, secret) {
			t.Errorf("the %s shows the secret whole: %q", what, text)
		}
		for _, want := range []string{"diff: -old ***", "grep: DEPLOY=***", "nul: ***", "split: "} {
			if !strings.Contains(text, want) {
				t.Errorf("the %s lacks %q: %q", what, want, text)
			}
		}
		if n := strings.Count(text, "***"); n != 4 {
			t.Errorf("the %s masks %d values, want 4: %q", what, n, text)
		}
	}
	if !strings.Contains(raw, "diff: -old \x1b[32m***\x1b[m\x1b[32m\x1b[m\n") || !strings.Contains(raw, "split: ***\x1b[34m\x1b[0m\n") {
		t.Errorf("the download lost the colour codes around the mask: %q", raw)
	}
	if !strings.Contains(streamed.String(), "text-green-400") {
		t.Errorf("the stream lost the colours: %q", streamed.String())
	}
}
