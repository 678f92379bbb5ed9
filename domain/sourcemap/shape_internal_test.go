package sourcemap

import (
	"strings"
	"testing"
)

// An escaped key, escaped separators and escaped newlines in the contents
// are counted as the library decodes them: the shape, and so the cost the
// cache charges, is the plain spelling's.
func TestShapeReadsTheDecodedMap(t *testing.T) {
	t.Parallel()
	plain := `{"version":3,"sources":["a.js"],"sourcesContent":["a\nb\nc"],"mappings":"AAAA;AACA;;,AAAA"}`
	escaped := `{"version":3,"sources":["a.js"],"sourcesContent":["a\u000ab\nc"],"mappin\u0067s":"AAAA\u003bAACA;;\u002cAAAA"}`
	p, e := shapeOf([]byte(plain)), shapeOf([]byte(escaped))
	if p != e || p.separators != 4 || p.segments != 3 || p.lines != 3 {
		t.Fatalf("plain %+v, escaped %+v", p, e)
	}
	// An index map: its sections' mappings, not the top level's.
	idx := `{"sections":[{"map":{"mappings":"A;B"}},{"map":{"mappin\u0067s":"` + strings.Repeat(";", 50) + `"}}],"mappings":";;;;"}`
	if sh := shapeOf([]byte(idx)); sh.mappings != 2 || sh.separators != 51 || sh.segments != 2 {
		t.Fatalf("index %+v", sh)
	}
}
