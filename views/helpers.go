// Package views holds the templ components of the cockpit. Views render the
// values they are handed and never query anything.
package views

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

func csrfHeaders(token string) string {
	b, _ := json.Marshal(map[string]string{"X-CSRF-Token": token})
	return string(b)
}

// Stamp is an exact UTC time for title attributes.
func Stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func itoa(n int) string { return strconv.Itoa(n) }

// placed is r shown as the place-th run in line.
func placed(r RunRow, place int) RunRow {
	r.Place = place
	return r
}

func equalFold(a, b string) bool { return strings.EqualFold(a, b) }

// ordinal is "1st", "2nd", "3rd", "4th" … "11th", "21st".
func ordinal(n int) string {
	suffix := "th"
	if n%100 < 11 || n%100 > 13 {
		switch n % 10 {
		case 1:
			suffix = "st"
		case 2:
			suffix = "nd"
		case 3:
			suffix = "rd"
		}
	}
	return strconv.Itoa(n) + suffix
}
