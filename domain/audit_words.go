package domain

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// AuditChange is one changed setting of an entry that changes several (a
// project's save): the field's words, and its value before and after.
// Secret settings (a provider token) carry no values, only Secret.
type AuditChange struct {
	Field  string `json:"field"`
	Label  string `json:"label"`
	From   string `json:"from,omitempty"`
	To     string `json:"to,omitempty"`
	Secret bool   `json:"secret,omitempty"`
}

// AuditWords says an entry in words, as the audit page's Detail column
// shows it ("changed the run command from `make test` to `go test ./...`").
// The API keeps the detail as an object; kinds without words of their own
// (and older entries) are said as "key: value" pairs.
func AuditWords(e AuditEntry) string {
	d := e.Detail
	str := func(k string) string {
		v, _ := d[k].(string)
		return v
	}
	has := func(k string) bool { _, ok := d[k]; return ok }
	switch e.Kind {
	case AuditOrganizationCreated:
		if o := str("owner"); o != "" {
			return fmt.Sprintf("created the organisation %s, owned by %s", e.Target, o)
		}
		return fmt.Sprintf("created the organisation %s", e.Target)
	case AuditProjectCreated:
		w := fmt.Sprintf("created the project %s", e.Target)
		if r := str("repo_url"); r != "" {
			w += fmt.Sprintf(" (repository %s, default branch %s, run command %s)", r, str("default_branch"), code(str("run_command")))
		}
		return w
	case AuditProjectUpdated:
		changes := auditChanges(d["changes"])
		if len(changes) == 0 {
			break
		}
		parts := make([]string, 0, len(changes))
		for _, c := range changes {
			switch {
			case c.Secret && c.To == "":
				parts = append(parts, "removed the "+c.Label)
			case c.Secret:
				parts = append(parts, "set a new "+c.Label)
			default:
				parts = append(parts, fmt.Sprintf("changed the %s from %s to %s", c.Label, code(c.From), code(c.To)))
			}
		}
		return strings.Join(parts, "; ")
	case AuditBindingChanged:
		on := ""
		if pr := str("project"); pr != "" {
			on = " of project " + pr
		}
		env := e.Target
		if env == "*" {
			env = "* (every environment)"
		}
		switch {
		case d["deleted"] == true && str("from") != "":
			return fmt.Sprintf("removed the binding of environment %s%s (its repair policy was %s)", env, on, str("from"))
		case d["deleted"] == true:
			return fmt.Sprintf("removed the binding of environment %s%s", env, on)
		case d["added"] == true || (has("project") && !has("from")):
			return fmt.Sprintf("added a binding for environment %s%s with repair policy %s", env, on, str("repair_policy"))
		case str("from") != "" && str("from") != str("repair_policy"):
			return fmt.Sprintf("changed the repair policy of environment %s%s from %s to %s", env, on, str("from"), str("repair_policy"))
		case str("repair_policy") != "":
			return fmt.Sprintf("set the repair policy of environment %s%s to %s", env, on, str("repair_policy"))
		}
	case AuditConnectionCreated:
		kind := str("kind")
		if kind == "" {
			kind = "server"
		}
		w := fmt.Sprintf("created the %s connection %s (token %s…)", kind, e.Target, str("prefix"))
		if kind == "browser" {
			w += ", allowed origins: " + originWords(d["allowed_origins"])
		}
		return w
	case AuditConnectionRevoked:
		return fmt.Sprintf("revoked the connection %s: its token is refused from now on", e.Target)
	case AuditConnectionOriginsChanged:
		if has("from") {
			return fmt.Sprintf("changed the allowed origins of connection %s from %s to %s", e.Target, originWords(d["from"]), originWords(d["allowed_origins"]))
		}
		return fmt.Sprintf("set the allowed origins of connection %s to %s", e.Target, originWords(d["allowed_origins"]))
	case AuditAlertDestinationCreated:
		return fmt.Sprintf("added the %s alert destination %s (%s)", str("kind"), orTarget(str("name"), e.Target), str("url"))
	case AuditAlertDestinationUpdated:
		var parts []string
		if str("from_name") != "" {
			parts = append(parts, fmt.Sprintf("renamed the alert destination %s to %s", str("from_name"), str("name")))
		} else if str("name") != "" && !has("destination_id") {
			parts = append(parts, "renamed the alert destination to "+str("name"))
		}
		if str("url") != "" {
			if str("from_url") != "" {
				parts = append(parts, fmt.Sprintf("changed the URL of alert destination %s from %s to %s", e.Target, str("from_url"), str("url")))
			} else {
				parts = append(parts, fmt.Sprintf("changed the URL of alert destination %s to %s", e.Target, str("url")))
			}
		}
		if len(parts) > 0 {
			return strings.Join(parts, "; ")
		}
		return fmt.Sprintf("saved the alert destination %s unchanged", e.Target)
	case AuditAlertDestinationDeleted:
		if str("name") != "" {
			return fmt.Sprintf("deleted the %s alert destination %s (%s)", str("kind"), str("name"), str("url"))
		}
		return "deleted an alert destination"
	case AuditSecretsForgotten:
		var parts []string
		if m, ok := d["erased"].(map[string]any); ok {
			kinds := make([]string, 0, len(m))
			for k := range m {
				kinds = append(kinds, k)
			}
			sort.Strings(kinds)
			for _, k := range kinds {
				parts = append(parts, fmt.Sprintf("%v %s(s)", m[k], k))
			}
		}
		return fmt.Sprintf("declared the secrets sealed under the lost key %s gone and erased them: %s", e.Target, strings.Join(parts, ", "))
	case AuditAlertDestinationTested:
		return fmt.Sprintf("sent a test alert to the %s alert destination %s (%s)", str("kind"), orTarget(str("name"), e.Target), str("url"))
	}
	return detailPairs(d)
}

func orTarget(v, target string) string {
	if v != "" {
		return v
	}
	return target
}

// code quotes a command or value as the page shows it: `make test`, or
// "nothing" when empty.
func code(s string) string {
	if strings.TrimSpace(s) == "" {
		return "nothing"
	}
	s = strings.ReplaceAll(s, "\n", " ⏎ ")
	return "`" + ClipString(s, 300) + "`"
}

func originWords(v any) string {
	list, _ := v.([]any)
	if len(list) == 0 {
		return "none (every browser refused)"
	}
	out := make([]string, 0, len(list))
	for _, o := range list {
		out = append(out, fmt.Sprint(o))
	}
	return strings.Join(out, ", ")
}

func auditChanges(v any) []AuditChange {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var out []AuditChange
	_ = json.Unmarshal(raw, &out)
	return out
}

// detailPairs says a detail as "key: value" pairs ("repair policy: approve
// · project id: …"), never as raw JSON.
func detailPairs(detail map[string]any) string {
	keys := make([]string, 0, len(detail))
	for k := range detail {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		var v string
		switch x := detail[k].(type) {
		case string:
			v = x
		case nil:
			v = "none"
		case bool:
			v = map[bool]string{true: "yes", false: "no"}[x]
		case []any:
			items := make([]string, 0, len(x))
			for _, i := range x {
				items = append(items, fmt.Sprint(i))
			}
			v = strings.Join(items, ", ")
			if v == "" {
				v = "none"
			}
		default:
			raw, _ := json.Marshal(x)
			v = string(raw)
		}
		parts = append(parts, strings.ReplaceAll(k, "_", " ")+": "+v)
	}
	return strings.Join(parts, " · ")
}
