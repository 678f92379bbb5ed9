package views

import (
	"html"
	"regexp"
	"strconv"
	"strings"
)

// A run's log as a person reads it: ANSI colours become spans with fixed
// classes (the only markup in the output: every byte of the log itself is
// escaped, and escape sequences other than colours are dropped, never
// shown raw); a line that a program redrew with carriage returns (git's
// progress counters) shows as its last state, one line per phase.

var ansiFG = map[int]string{
	30: "text-slate-500", 31: "text-red-400", 32: "text-green-400", 33: "text-yellow-300",
	34: "text-blue-400", 35: "text-fuchsia-400", 36: "text-cyan-300", 37: "text-slate-100",
	90: "text-slate-400", 91: "text-red-300", 92: "text-green-300", 93: "text-yellow-200",
	94: "text-blue-300", 95: "text-fuchsia-300", 96: "text-cyan-200", 97: "text-white",
}

var ansiBG = map[int]string{
	40: "bg-slate-800", 41: "bg-red-900", 42: "bg-green-900", 43: "bg-yellow-900",
	44: "bg-blue-900", 45: "bg-fuchsia-900", 46: "bg-cyan-900", 47: "bg-slate-600",
}

// ansiStyle is the SGR state.
type ansiStyle struct {
	fg, bg          int
	bold, underline bool
}

func (s ansiStyle) classes() string {
	var c []string
	if v, ok := ansiFG[s.fg]; ok {
		c = append(c, v)
	}
	if v, ok := ansiBG[s.bg]; ok {
		c = append(c, v)
	}
	if s.bold {
		c = append(c, "font-bold")
	}
	if s.underline {
		c = append(c, "underline")
	}
	return strings.Join(c, " ")
}

// apply moves the state by one SGR sequence's parameters.
func (s *ansiStyle) apply(params string) {
	if params == "" {
		*s = ansiStyle{}
		return
	}
	parts := strings.Split(params, ";")
	for i := 0; i < len(parts); i++ {
		n, err := strconv.Atoi(parts[i])
		if err != nil {
			continue
		}
		switch {
		case n == 0:
			*s = ansiStyle{}
		case n == 1:
			s.bold = true
		case n == 4:
			s.underline = true
		case n == 22:
			s.bold = false
		case n == 24:
			s.underline = false
		case n == 39:
			s.fg = 0
		case n == 49:
			s.bg = 0
		case n == 38 || n == 48:
			// 256-colour and true-colour forms: skip their arguments.
			if i+1 < len(parts) && parts[i+1] == "5" {
				i += 2
			} else if i+1 < len(parts) && parts[i+1] == "2" {
				i += 4
			}
		case ansiFG[n] != "":
			s.fg = n
		case ansiBG[n] != "":
			s.bg = n
		}
	}
}

// FoldProgress keeps, of each line, what a terminal would show last: the
// text after its last carriage return (an empty redraw keeps the one
// before).
func FoldProgress(line string) string {
	if !strings.Contains(line, "\r") {
		return line
	}
	parts := strings.Split(line, "\r")
	for i := len(parts) - 1; i >= 0; i-- {
		if strings.TrimSpace(parts[i]) != "" {
			return parts[i]
		}
	}
	return ""
}

// ANSIToHTML renders one line of log text as escaped HTML with colour spans.
// What it drops is what the log's secret masker (domain/internal/mask,
// escState) treats as hidden when it looks for a value split by those
// bytes: change the two together.
func ANSIToHTML(line string) string {
	var b strings.Builder
	var st ansiStyle
	open := false
	setStyle := func(next ansiStyle) {
		if next == st {
			return
		}
		if open {
			b.WriteString("</span>")
			open = false
		}
		st = next
		if c := st.classes(); c != "" {
			b.WriteString(`<span class="`)
			b.WriteString(c) // from the fixed tables above: never log text
			b.WriteString(`">`)
			open = true
		}
	}
	text := 0 // start of pending plain text
	flush := func(end int) {
		if end > text {
			b.WriteString(html.EscapeString(strings.ToValidUTF8(line[text:end], "\uFFFD")))
		}
	}
	for i := 0; i < len(line); {
		c := line[i]
		if c != 0x1b && (c >= 0x20 || c == '\t') && c != 0x7f {
			i++
			continue
		}
		flush(i)
		if c != 0x1b {
			i++ // other control characters are dropped
			text = i
			continue
		}
		// ESC: a CSI sequence (ESC [ params final), or ESC and one more byte.
		j := i + 1
		if j < len(line) && line[j] == '[' {
			j++
			k := j
			for k < len(line) && (line[k] >= 0x30 && line[k] <= 0x3f) {
				k++
			}
			for k < len(line) && line[k] >= 0x20 && line[k] <= 0x2f {
				k++
			}
			if k < len(line) && line[k] >= 0x40 && line[k] <= 0x7e {
				if line[k] == 'm' {
					next := st
					next.apply(line[j:k])
					setStyle(next)
				}
				k++
			}
			i = k
		} else if j < len(line) && line[j] == ']' {
			// OSC (a window title, a hyperlink): up to BEL or ESC \.
			k := j + 1
			for k < len(line) && line[k] != 0x07 && line[k] != 0x1b {
				k++
			}
			if k < len(line) && line[k] == 0x07 {
				k++
			} else if k+1 < len(line) && line[k+1] == '\\' {
				k += 2
			}
			i = k
		} else {
			if j < len(line) {
				j++
			}
			i = j
		}
		text = i
	}
	flush(len(line))
	if open {
		b.WriteString("</span>")
	}
	return b.String()
}

// repairTaskOpening opens the task anvil hands a repair (ANVIL_TASK,
// jobs/repair.go).
const repairTaskOpening = "Fix the production incident "

// jsonMember is a line of pretty-printed JSON: a quoted key, a colon, a
// value, perhaps a comma.
var jsonMember = regexp.MustCompile(`^\s*"(?:[^"\\]|\\.)*"\s*:\s*(?:".*"|-?[0-9][0-9.eE+-]*|true|false|null|\{\s*\}?|\[\s*\]?)\s*,?\s*$`)

// errorWords mark a line a person looks for first.
var errorWords = []string{"error", "fail", "fatal", "panic", "exception"}

// LooksLikeError reports whether a log line reads like an error of the
// command's own output. anvil's echo of the command ("[anvil] $ make
// test-fail") is never one — it would be the first error of every run
// whose command names a failure —, and neither is a line of JSON (a
// repair agent's payloads quote "error" fields of every tool call).
func LooksLikeError(line string) bool {
	if strings.HasPrefix(line, "[anvil] $ ") {
		return false
	}
	// A connection the run's proxy refused or could not make is why the
	// command failed more often than not (docs/network.md).
	if strings.HasPrefix(line, "[anvil] refused ") || strings.HasPrefix(line, "[anvil] could not reach ") {
		return true
	}
	if t := strings.TrimSpace(line); len(t) > 1 && (t[0] == '{' && t[len(t)-1] == '}' || t[0] == '[' && t[len(t)-1] == ']' && strings.HasPrefix(t, "[{")) {
		return false
	}
	// A repair's task is anvil's own words and its incident file is JSON
	// (docs/architecture.md, the repair job): echoed by the repair command,
	// the task's sentence and the file's lines ("type": "ZeroDivisionError",)
	// quote the incident's error, which is what the repair is about, not
	// what went wrong in it.
	if strings.Contains(line, repairTaskOpening) || jsonMember.MatchString(line) {
		return false
	}
	lower := strings.ToLower(line)
	for _, w := range errorWords {
		if strings.Contains(lower, w) {
			return true
		}
	}
	return false
}

// LogHTML renders a piece of a run's log as lines: each with its time since
// the run started (offset seconds) in a gutter, colours rendered, progress
// redraws folded, lines that read like an error marked for "jump to the
// first error". Every byte of the log is escaped.
func LogHTML(text string, offset float64) string { return logHTML(text, offset, "") }

// LogHTMLStep is LogHTML for a chunk of one pipeline step's log (step: its
// index; nil for anvil's narration): every line carries data-step, so the
// page can show one step's log alone (static/app.js).
func LogHTMLStep(text string, offset float64, step *int) string {
	if step == nil {
		return logHTML(text, offset, "")
	}
	return logHTML(text, offset, ` data-step="`+strconv.Itoa(*step)+`"`)
}

// ServiceLogHTML renders the kept end of a service's log (docs/images.md,
// "Services") as LogHTML does, colours and error lines alike, without the
// time gutter: the end of a service's log has no times of its own.
func ServiceLogHTML(text string) string {
	text = strings.TrimSuffix(text, "\n")
	if text == "" {
		return ""
	}
	var b strings.Builder
	for _, line := range strings.Split(text, "\n") {
		line = FoldProgress(line)
		cls := "block"
		if LooksLikeError(line) {
			cls = "block bg-red-950/40"
		}
		b.WriteString(`<span class="` + cls + `">`)
		b.WriteString(ANSIToHTML(line))
		b.WriteString("</span>")
	}
	return b.String()
}

func logHTML(text string, offset float64, attr string) string {
	if text == "" {
		return ""
	}
	t := gutter(offset)
	text = strings.TrimSuffix(text, "\n")
	var b strings.Builder
	for _, line := range strings.Split(text, "\n") {
		line = FoldProgress(line)
		cls := "log-line block"
		if LooksLikeError(line) {
			cls = "log-line block log-error bg-red-950/40"
		}
		b.WriteString(`<span class="` + cls + `" data-t="` + t + `"` + attr + `><span class="log-t mr-3 inline-block w-12 select-none text-right text-slate-500" title="` + t + ` since the run started">` + t + `</span>`)
		b.WriteString(ANSIToHTML(line))
		b.WriteString("</span>")
	}
	return b.String()
}

// gutter is "+m:ss" (or "+h:mm:ss").
func gutter(sec float64) string {
	s := int(sec)
	if s >= 3600 {
		return "+" + strconv.Itoa(s/3600) + ":" + pad2(s%3600/60) + ":" + pad2(s%60)
	}
	return "+" + strconv.Itoa(s/60) + ":" + pad2(s%60)
}

func pad2(n int) string {
	if n < 10 {
		return "0" + strconv.Itoa(n)
	}
	return strconv.Itoa(n)
}
