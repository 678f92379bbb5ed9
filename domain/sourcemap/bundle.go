package sourcemap

import (
	"archive/zip"
	"bytes"
	"crypto/sha1" //nolint:gosec // sentry-cli names chunks and bundles by SHA-1; it is an identity here, not a defence
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"strings"

	"anvil/domain"
)

// Limits bound what an upload may hold (docs/sourcemap.md, "Limits").
type Limits struct {
	// File is the most one file of a bundle may hold, inflated.
	File int64
	// Bundle is the most one bundle may hold, inflated, all files together.
	Bundle int64
	// Project is the most a project's stored artifacts may hold.
	Project int64
	// Files is the most file rows a project's uploads may name.
	Files int
}

// The defaults of the limits (ANVIL_SOURCEMAP_MAX_FILE, …_MAX_BUNDLE,
// …_MAX_PROJECT).
const (
	DefaultMaxFile    = 16 << 20
	DefaultMaxBundle  = 64 << 20
	DefaultMaxProject = 100 << 20
	// DefaultMaxFiles bounds a project's file rows: every upload adds
	// one per file, and a frame's lookup reads them.
	DefaultMaxFiles = 20000
	// maxEntries bounds the files of one bundle: a zip of a million empty
	// entries is a bomb of another kind.
	maxEntries = 5000
	// maxRatio is the inflation an entry may claim before it is read as a
	// bomb: minified JavaScript and its maps compress 3–10 times.
	maxRatio = 200
	// ratioFloor is the size under which no ratio is suspicious.
	ratioFloor = 1 << 20
)

// Kinds of files in a bundle: the manifest's types (sentry-cli's
// SourceFileType).
const (
	KindMinified = "minified_source"
	KindSource   = "source"
	KindMap      = "source_map"
)

// File is one file of a bundle: its URL (`~/path` or a full URL), kind,
// debug id, the map it references and its content.
type File struct {
	URL       string
	Kind      string
	DebugID   string
	SourceMap string
	Data      []byte
	Checksum  string
}

// Bundle is an artifact bundle read whole and checked.
type Bundle struct {
	Files   []File
	Release string
	Dist    string
	// DebugID is the bundle's own id (sentry-cli's debug_id attribute).
	DebugID string
	Bytes   int64
}

// Refusals of an upload: each a 422 (or 413 for the limits) with its code,
// and nothing stored.
var (
	// ErrTooLarge is the kind of the limits' refusals (413 at the web tier).
	ErrTooLarge = fmt.Errorf("too large")
)

func tooLarge(code, format string, args ...any) error {
	return domain.NewError(ErrTooLarge, code, format, args...)
}

func invalid(code, format string, args ...any) error {
	return domain.Invalid(code, format, args...)
}

// manifest is sentry-cli's (symbolic's SourceBundle) manifest.json.
type manifest struct {
	Files map[string]struct {
		Type    string            `json:"type"`
		URL     string            `json:"url"`
		Headers map[string]string `json:"headers"`
	} `json:"files"`
	Attributes map[string]string `json:"attributes"`
}

// ReadBundle reads an artifact bundle: a zip with manifest.json naming each
// file's URL, type and headers (debug-id, sourcemap). It reads every entry
// through a limit, so a zip that lies about its sizes costs at most the
// limits, and refuses the whole bundle on the first fault: a bomb, a file
// or the bundle over the limits, a map that is not JSON, a manifest that
// names a file the zip does not hold.
func ReadBundle(data []byte, lim Limits) (*Bundle, error) {
	return ReadBundleAt(bytes.NewReader(data), int64(len(data)), lim)
}

// ReadBundleAt is ReadBundle over a bundle of size bytes that is not held
// in memory (an assembled bundle spooled to a file).
func ReadBundleAt(r io.ReaderAt, size int64, lim Limits) (*Bundle, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil, invalid("bundle_unreadable", "the artifact bundle is not a zip archive: %s", clip(err.Error()))
	}
	if len(zr.File) > maxEntries {
		return nil, invalid("zip_bomb", "the artifact bundle holds %d entries; at most %d", len(zr.File), maxEntries)
	}
	entries := make(map[string]*zip.File, len(zr.File))
	for _, f := range zr.File {
		if f.UncompressedSize64 > uint64(ratioFloor) && f.CompressedSize64 > 0 && f.UncompressedSize64/f.CompressedSize64 > maxRatio {
			return nil, invalid("zip_bomb", "entry %q inflates %d times (%d bytes from %d); a bundle of source files inflates far less",
				clip(f.Name), f.UncompressedSize64/f.CompressedSize64, f.UncompressedSize64, f.CompressedSize64)
		}
		entries[f.Name] = f
	}
	mf, ok := entries["manifest.json"]
	if !ok {
		return nil, invalid("bundle_no_manifest", "the artifact bundle has no manifest.json (upload it with sentry-cli sourcemaps upload)")
	}
	mraw, err := readEntry(mf, lim.File)
	if err != nil {
		return nil, err
	}
	var m manifest
	if err := json.Unmarshal(mraw, &m); err != nil {
		return nil, invalid("bundle_bad_manifest", "manifest.json is not the manifest of an artifact bundle: %s", clip(err.Error()))
	}
	b := &Bundle{Release: m.Attributes["release"], Dist: m.Attributes["dist"], DebugID: strings.ToLower(m.Attributes["debug_id"])}
	for name, info := range m.Files {
		zf, ok := entries[name]
		if !ok {
			return nil, invalid("bundle_bad_manifest", "manifest.json names %q, which the bundle does not hold", clip(name))
		}
		if info.URL == "" {
			return nil, invalid("bundle_bad_manifest", "manifest.json gives %q no url", clip(name))
		}
		content, err := readEntry(zf, lim.File)
		if err != nil {
			return nil, err
		}
		b.Bytes += int64(len(content))
		if lim.Bundle > 0 && b.Bytes > lim.Bundle {
			return nil, tooLarge("bundle_too_large", "the bundle's files hold more than %d bytes (ANVIL_SOURCEMAP_MAX_BUNDLE)", lim.Bundle)
		}
		f := File{URL: info.URL, Kind: info.Type, Data: content}
		for k, v := range info.Headers {
			switch strings.ToLower(k) {
			case "debug-id", "debug_id":
				f.DebugID = strings.ToLower(strings.TrimSpace(v))
			case "sourcemap", "x-sourcemap":
				f.SourceMap = strings.TrimSpace(v)
			}
		}
		if err := addFile(b, f); err != nil {
			return nil, err
		}
	}
	if len(b.Files) == 0 {
		return nil, invalid("bundle_empty", "the artifact bundle holds no files")
	}
	return b, nil
}

// addFile checks one file and adds it.
func addFile(b *Bundle, f File) error {
	if len(f.URL) > 2048 {
		return invalid("bundle_bad_name", "a file's url is longer than 2048 characters")
	}
	switch f.Kind {
	case KindMinified, KindSource, KindMap:
	case "":
		f.Kind = KindSource
	default:
		// Indexed RAM bundles and the like: kept as plain files.
		f.Kind = KindSource
	}
	if f.Kind == KindMap {
		var probe struct {
			Version int `json:"version"`
		}
		if err := json.Unmarshal(f.Data, &probe); err != nil {
			return invalid("sourcemap_invalid", "%s is not a source map (not JSON: %s)", clip(f.URL), clip(err.Error()))
		}
		// A map of mostly empty lines would allocate a mapping for each
		// separator once parsed (docs/sourcemap.md, "Bounded and fast").
		if sh := shapeOf(f.Data); sh.sparse() {
			return invalid("sourcemap_sparse", "%s: its mappings hold %d separators for %d positions (at most %d per position and %d more); no build writes that, refused",
				clip(f.URL), sh.separators, sh.segments, sparseRatio, sparseAllowed)
		}
	}
	sum := sha1.Sum(f.Data) //nolint:gosec // see the import
	f.Checksum = hex.EncodeToString(sum[:])
	b.Files = append(b.Files, f)
	return nil
}

// readEntry inflates one entry through the file limit; an entry that
// inflates past what its header declared is a bomb.
func readEntry(f *zip.File, max int64) ([]byte, error) {
	if max > 0 && f.UncompressedSize64 > uint64(max) {
		return nil, tooLarge("file_too_large", "%s holds %d bytes; at most %d a file (ANVIL_SOURCEMAP_MAX_FILE)", clip(f.Name), f.UncompressedSize64, max)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, invalid("bundle_unreadable", "entry %q cannot be read: %s", clip(f.Name), clip(err.Error()))
	}
	defer rc.Close()
	limit := int64(f.UncompressedSize64) + 1
	if max > 0 && limit > max+1 {
		limit = max + 1
	}
	data, err := io.ReadAll(io.LimitReader(rc, limit))
	if err != nil {
		return nil, invalid("bundle_unreadable", "entry %q cannot be inflated: %s", clip(f.Name), clip(err.Error()))
	}
	if int64(len(data)) > int64(f.UncompressedSize64) {
		return nil, invalid("zip_bomb", "entry %q inflates past the size its header declares", clip(f.Name))
	}
	return data, nil
}

// PlainFile is one file of the multipart upload: its name as uploaded.
type PlainFile struct {
	Name string
	Data []byte
}

// BundleFromFiles makes a bundle of plainly uploaded files (POST
// /api/private/projects/:id/sourcemaps): each is named `~/<name>`, a
// *.map is a source map, the rest are minified sources whose map is
// `<name>.map` when it came along (or what its sourceMappingURL says).
// Debug ids are read as sentry-cli injects them (`//# debugId=` in a
// bundle, "debug_id" in a map).
func BundleFromFiles(files []PlainFile, release, dist string, lim Limits) (*Bundle, error) {
	b := &Bundle{Release: release, Dist: dist}
	if len(files) > maxEntries {
		return nil, invalid("too_many_files", "%d files; at most %d an upload", len(files), maxEntries)
	}
	for _, pf := range files {
		if lim.File > 0 && int64(len(pf.Data)) > lim.File {
			return nil, tooLarge("file_too_large", "%s holds %d bytes; at most %d a file (ANVIL_SOURCEMAP_MAX_FILE)", clip(pf.Name), len(pf.Data), lim.File)
		}
		b.Bytes += int64(len(pf.Data))
		if lim.Bundle > 0 && b.Bytes > lim.Bundle {
			return nil, tooLarge("bundle_too_large", "the upload's files hold more than %d bytes (ANVIL_SOURCEMAP_MAX_BUNDLE)", lim.Bundle)
		}
		name := strings.TrimLeft(path.Clean("/"+strings.ReplaceAll(pf.Name, "\\", "/")), "/")
		if name == "" || name == "." {
			return nil, invalid("bundle_bad_name", "a file has no name")
		}
		f := File{URL: "~/" + name, Data: pf.Data}
		if strings.HasSuffix(name, ".map") {
			f.Kind = KindMap
			var probe struct {
				DebugID  string `json:"debug_id"`
				DebugID2 string `json:"debugId"`
			}
			_ = json.Unmarshal(pf.Data, &probe)
			f.DebugID = strings.ToLower(firstNonEmpty(probe.DebugID, probe.DebugID2))
		} else {
			f.Kind = KindMinified
			f.DebugID, f.SourceMap = scanComments(pf.Data)
		}
		if err := addFile(b, f); err != nil {
			return nil, err
		}
	}
	if len(b.Files) == 0 {
		return nil, invalid("bundle_empty", "the upload holds no files")
	}
	return b, nil
}

// scanComments reads the `//# debugId=` and `//# sourceMappingURL=`
// comments of a bundle's last lines.
func scanComments(data []byte) (debugID, mapRef string) {
	tail := data
	if len(tail) > 4096 {
		tail = tail[len(tail)-4096:]
	}
	for _, line := range strings.Split(string(tail), "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "//# debugId="); ok {
			debugID = strings.ToLower(strings.TrimSpace(v))
		}
		if v, ok := strings.CutPrefix(line, "//# sourceMappingURL="); ok && !strings.HasPrefix(v, "data:") {
			mapRef = strings.TrimSpace(v)
		}
	}
	return debugID, mapRef
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

func clip(s string) string { return domain.ClipString(s, 120) }
