package otlp

import (
	"regexp"
	"strconv"
	"strings"
)

// Frame is one frame of a parsed stack trace.
type Frame struct {
	File        string
	Function    string
	Line        int
	Col         int
	ContextCode string
	InApp       bool
}

// Bounds of the stack parser (docs/otlp.md, "Stack traces"): the text is an
// attribute of a bounded body, but one line of a megabyte or a million
// short lines must still cost a bounded time. Frames beyond MaxFrames are
// dropped; the feed keeps at most event.MaxFrames of them anyway.
const (
	MaxStackBytes = 256 << 10 // text read; the rest is ignored
	MaxLineBytes  = 4096      // a longer line is no frame
	MaxFrames     = 200       // frames parsed
)

// The frame lines of the languages OTel SDKs write exception.stacktrace in.
// Each pattern is anchored and Go's regexp runs in linear time, so no line
// can make the parser slow.
var (
	// Java and Kotlin: "\tat com.acme.Shop.pay(Shop.java:42)", also with a
	// module ("app//com.acme…" or "java.base@21/java.lang…") or "(Native Method)".
	javaFrame = regexp.MustCompile(`^\s*at\s+(?:[\w.$-]+(?:@[\w.-]+)?/+)?([\w$.<>\[\]/-]+)\(([^()]*)\)\s*$`)
	// .NET: "   at Acme.Shop.Pay(Int32 cents) in /src/Shop.cs:line 42".
	dotnetFrame = regexp.MustCompile(`^\s*at\s+(.+?\))(?:\s+in\s+(.+):line\s+(\d+))?\s*$`)
	// Python: `  File "/app/shop.py", line 42, in pay`.
	pythonFrame = regexp.MustCompile(`^\s*File\s+"([^"]*)",\s+line\s+(\d+)(?:,\s+in\s+(.+?))?\s*$`)
	// JavaScript (V8): "    at pay (/app/shop.js:42:7)", "    at /app/shop.js:42:7",
	// "    at async Promise.all (index 0)".
	jsFrame      = regexp.MustCompile(`^\s*at\s+(?:(.+?)\s+\()?(.+?):(\d+):(\d+)\)?\s*$`)
	jsFrameNoLoc = regexp.MustCompile(`^\s*at\s+(.+?)\s+\((native|index \d+|<anonymous>)\)\s*$`)
	// Ruby: "/app/shop.rb:42:in `pay'", "\tfrom /app/shop.rb:42:in 'Shop#pay'",
	// and the first line of full_message: "/app/shop.rb:42:in `pay': boom (RuntimeError)".
	rubyFrame = regexp.MustCompile("^\\s*(?:from\\s+)?(\\S[^:]*):(\\d+):in\\s+[`'](.+?)'")
	// Go: a function line ("main.pay(...)", "created by main.main in goroutine 1")
	// followed by "\t/app/main.go:42 +0x1d".
	goFile = regexp.MustCompile(`^\s+(\S+\.go|\S+\.s):(\d+)(?:\s+\+0x[0-9a-f]+)?\s*$`)
)

// ParseStack reads a stack trace's text into frames, the crash site first
// (the order of the feed's stacktrace). lang is the SDK's
// telemetry.sdk.language ("java", "python", "go", "nodejs", "webjs",
// "dotnet", "ruby"), which decides between shapes that look alike; when it
// is unknown the first shape that matches a line wins. Text that is no
// stack trace gives no frames.
func ParseStack(text, lang string) []Frame {
	if len(text) > MaxStackBytes {
		text = text[:MaxStackBytes]
	}
	lang = strings.ToLower(lang)
	var out []Frame
	outermostFirst := false
	var goFn string // a Go function line waiting for its file line
	for len(text) > 0 && len(out) < MaxFrames {
		var line string
		if i := strings.IndexByte(text, '\n'); i >= 0 {
			line, text = text[:i], text[i+1:]
		} else {
			line, text = text, ""
		}
		line = strings.TrimRight(line, "\r")
		if len(line) > MaxLineBytes || strings.TrimSpace(line) == "" {
			goFn = ""
			continue
		}
		if goFn != "" {
			if m := goFile.FindStringSubmatch(line); m != nil {
				out = append(out, Frame{File: m[1], Function: goFn, Line: atoi(m[2]), InApp: goInApp(m[1], goFn)})
				goFn = ""
				continue
			}
			goFn = ""
		}
		if f, ok := parseLine(line, lang); ok {
			out = append(out, f)
			continue
		}
		if (lang == "" || lang == "python") && pythonFrame.MatchString(line) {
			m := pythonFrame.FindStringSubmatch(line)
			outermostFirst = true
			out = append(out, Frame{File: m[1], Line: atoi(m[2]), Function: m[3], InApp: pythonInApp(m[1])})
			// The source line Python prints under a frame is its context.
			if i := strings.IndexByte(text, '\n'); i != 0 {
				next := text
				if i > 0 {
					next = text[:i]
				}
				if strings.HasPrefix(next, "    ") && !pythonFrame.MatchString(next) && len(next) <= MaxLineBytes {
					out[len(out)-1].ContextCode = strings.TrimSpace(next)
				}
			}
			continue
		}
		if lang == "" || lang == "go" {
			goFn = goFunction(line)
		}
	}
	if outermostFirst {
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	}
	return out
}

// parseLine reads the one-line frame shapes: Java, JavaScript, .NET, Ruby
// (JavaScript before .NET: a V8 frame would pass for a .NET frame without
// a file, never the other way round).
func parseLine(line, lang string) (Frame, bool) {
	any := lang == ""
	if any || lang == "java" || lang == "kotlin" {
		if m := javaFrame.FindStringSubmatch(line); m != nil && !strings.Contains(m[2], " in ") {
			f := Frame{Function: m[1], InApp: javaInApp(m[1])}
			file, ln, ok := strings.Cut(m[2], ":")
			if ok {
				f.Line = atoi(ln)
			}
			if file != "Native Method" && file != "Unknown Source" {
				f.File = file
			}
			if f.File == "" || !strings.Contains(f.File, " ") {
				return f, true
			}
		}
	}
	if any || lang == "nodejs" || lang == "webjs" || lang == "javascript" {
		if m := jsFrame.FindStringSubmatch(line); m != nil {
			fn := strings.TrimPrefix(m[1], "async ")
			if fn == "" {
				fn = "<anonymous>"
			}
			return Frame{Function: fn, File: m[2], Line: atoi(m[3]), Col: atoi(m[4]), InApp: jsInApp(m[2])}, true
		}
		if m := jsFrameNoLoc.FindStringSubmatch(line); m != nil {
			return Frame{Function: strings.TrimPrefix(m[1], "async "), InApp: false}, true
		}
	}
	if any || lang == "dotnet" {
		if m := dotnetFrame.FindStringSubmatch(line); m != nil {
			return Frame{Function: m[1], File: m[2], Line: atoi(m[3]), InApp: dotnetInApp(m[1])}, true
		}
	}
	if any || lang == "ruby" {
		if m := rubyFrame.FindStringSubmatch(line); m != nil {
			return Frame{File: m[1], Line: atoi(m[2]), Function: m[3], InApp: rubyInApp(m[1])}, true
		}
	}
	return Frame{}, false
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// Whether a frame is the application's own: not the language's runtime or
// standard library, and not a dependency. Grouping hashes only in-app frames
// when there are any (docs/architecture.md, "Incident lifecycle"), so a
// framework's frames do not split one fault into many incidents.
func javaInApp(fn string) bool {
	for _, p := range []string{"java.", "javax.", "jdk.", "sun.", "com.sun.", "kotlin.", "kotlinx.", "scala.", "org.springframework.", "org.apache.", "io.netty.", "io.opentelemetry.", "org.junit."} {
		if strings.HasPrefix(fn, p) {
			return false
		}
	}
	return true
}

func dotnetInApp(fn string) bool {
	return !strings.HasPrefix(fn, "System.") && !strings.HasPrefix(fn, "Microsoft.") && !strings.HasPrefix(fn, "OpenTelemetry.")
}

func pythonInApp(file string) bool {
	return !strings.Contains(file, "site-packages") && !strings.Contains(file, "dist-packages") &&
		!strings.Contains(file, "/lib/python") && !strings.HasPrefix(file, "<")
}

func jsInApp(file string) bool {
	return !strings.Contains(file, "node_modules") && !strings.HasPrefix(file, "node:") && !strings.HasPrefix(file, "internal/")
}

func rubyInApp(file string) bool {
	return !strings.Contains(file, "/gems/") && !strings.Contains(file, "/rubygems/") && !strings.HasPrefix(file, "<internal:")
}

func goInApp(file, fn string) bool {
	if strings.Contains(file, "/pkg/mod/") || strings.Contains(file, "/go/src/") || strings.Contains(file, "/vendor/") {
		return false
	}
	for _, p := range []string{"runtime.", "runtime/", "testing.", "net/http.", "go.opentelemetry.io/"} {
		if strings.HasPrefix(fn, p) {
			return false
		}
	}
	return true
}

// goFunction reads a Go traceback's function line — "main.pay(0x1)",
// "main.(*Shop).pay(...)", "created by main.main in goroutine 1" — as the
// function's name, or "" when the line is none. The frame is kept only when
// the file line follows it.
func goFunction(line string) string {
	if line[0] == ' ' || line[0] == '\t' || strings.HasPrefix(line, "goroutine ") {
		return ""
	}
	line = strings.TrimPrefix(line, "created by ")
	if i := strings.Index(line, " in goroutine "); i >= 0 {
		line = line[:i]
	}
	if strings.HasSuffix(line, ")") {
		if i := strings.LastIndexByte(line, '('); i > 0 {
			line = line[:i]
		}
	}
	if strings.ContainsAny(line, " \t") || !strings.Contains(line, ".") {
		return ""
	}
	return line
}
