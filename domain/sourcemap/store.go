package sourcemap

import (
	"bytes"
	"context"
	"crypto/sha1" //nolint:gosec // sentry-cli's checksums are SHA-1: an identity, not a defence
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"anvil/domain"
)

// Chunk-upload options (docs/sourcemap.md): what sentry-cli reads from GET
// /api/0/organizations/{org}/chunk-upload/.
const (
	ChunkSize        = 8 << 20
	ChunksPerRequest = 64
	MaxRequestSize   = 32 << 20
	// maxChunks bounds the chunks one assemble call may name.
	maxChunks = 4096
)

// Service keeps uploads and symbolicates events.
type Service struct {
	s      *domain.Store
	Limits Limits
	cache  *mapCache
	look   *lookups
	// Budget bounds one event's symbolication (DefaultBudget when 0).
	Budget time.Duration

	walked     atomic.Int64
	overBudget atomic.Int64
}

// New is the service over the store with the limits and a cache of parsed
// maps holding at most cacheBytes (by the maps' sizes).
func New(s *domain.Store, lim Limits, cacheBytes int64) *Service {
	if lim.File <= 0 {
		lim.File = DefaultMaxFile
	}
	if lim.Bundle <= 0 {
		lim.Bundle = DefaultMaxBundle
	}
	if lim.Project <= 0 {
		lim.Project = DefaultMaxProject
	}
	if lim.Files <= 0 {
		lim.Files = DefaultMaxFiles
	}
	if cacheBytes <= 0 {
		cacheBytes = 256 << 20
	}
	return &Service{s: s, Limits: lim, cache: newMapCache(cacheBytes), look: newLookups()}
}

// Chunk is one chunk as sentry-cli sends it: named by its SHA-1.
type Chunk struct {
	Checksum string
	Data     []byte
}

// AssembleRequest is sentry-cli's POST …/artifactbundle/assemble/ body.
type AssembleRequest struct {
	Checksum string   `json:"checksum"`
	Chunks   []string `json:"chunks"`
	Projects []string `json:"projects"`
	Version  string   `json:"version"`
	Dist     string   `json:"dist"`
}

// AssembleResult is its answer: state ok, or not_found with the chunks
// still to send.
type AssembleResult struct {
	State         string   `json:"state"`
	MissingChunks []string `json:"missingChunks"`
	Detail        *string  `json:"detail"`
}

// BundleInfo describes a stored bundle (the upload that mapped a frame).
type BundleInfo struct {
	ID        uuid.UUID `bun:"id" json:"id"`
	ProjectID uuid.UUID `bun:"project_id" json:"project_id"`
	Release   string    `bun:"release" json:"release"`
	Dist      string    `bun:"dist" json:"dist,omitempty"`
	Via       string    `bun:"via" json:"via"`
	Files     int       `bun:"files" json:"files"`
	Bytes     int64     `bun:"bytes" json:"bytes"`
	CreatedAt time.Time `bun:"created_at" json:"created_at"`
}

// org checks that the caller's token belongs to the organisation the URL
// names and may upload: another organisation's slug is "not found".
func org(p *domain.Principal, slug string) error {
	if p == nil || p.OrgSlug != slug {
		return domain.NotFound("organization")
	}
	return domain.RequireWrite(p)
}

func validSHA1(s string) bool {
	if len(s) != 40 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}

func sha1Hex(b []byte) string {
	sum := sha1.Sum(b) //nolint:gosec // see the import
	return hex.EncodeToString(sum[:])
}

// PutChunks stores the chunks of one request: each must hash to its name,
// else none is stored. Chunks wait for the assemble call that takes them.
func (m *Service) PutChunks(ctx context.Context, p *domain.Principal, orgSlug string, chunks []Chunk) error {
	if err := org(p, orgSlug); err != nil {
		return err
	}
	var total int64
	for _, c := range chunks {
		if !validSHA1(c.Checksum) {
			return invalid("chunk_bad_name", "a chunk must be named by its SHA-1 (40 lower-case hex digits), got %q", clip(c.Checksum))
		}
		if len(c.Data) > ChunkSize {
			return tooLarge("chunk_too_large", "a chunk holds %d bytes; at most %d", len(c.Data), ChunkSize)
		}
		if got := sha1Hex(c.Data); got != c.Checksum {
			return invalid("chunk_checksum_mismatch", "chunk %s hashes to %s: it was damaged on the way; nothing was stored, send it again", c.Checksum, got)
		}
		total += int64(len(c.Data))
	}
	if len(chunks) == 0 {
		return invalid("no_chunks", "the request holds no chunk (multipart fields file or file_gzip)")
	}
	return m.s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		// The quota is read and charged under the organisation's chunk
		// lock: concurrent requests cannot each see the room of one.
		if err := orgLock(ctx, tx, "sourcemap.chunks", p.OrgID); err != nil {
			return err
		}
		var pending int64
		if err := tx.NewRaw(`SELECT coalesce(sum(length(data)), 0) FROM sourcemap_chunks WHERE org_id = ?`, p.OrgID).Scan(ctx, &pending); err != nil {
			return fmt.Errorf("sourcemap: pending chunks: %w", err)
		}
		if pending+total > 2*m.Limits.Bundle {
			return tooLarge("chunks_over_limit", "the organisation holds %d bytes of chunks not yet assembled; at most %d (twice ANVIL_SOURCEMAP_MAX_BUNDLE)", pending+total, 2*m.Limits.Bundle)
		}
		for _, c := range chunks {
			if _, err := tx.NewRaw(`INSERT INTO sourcemap_chunks (org_id, checksum, data) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`,
				p.OrgID, c.Checksum, c.Data).Exec(ctx); err != nil {
				return fmt.Errorf("sourcemap: store chunk: %w", err)
			}
		}
		return nil
	})
}

// Assemble answers sentry-cli's assemble call: the chunks it has not sent
// yet (state not_found), or the bundle assembled, checked and stored
// (state ok). A bundle already stored is ok at once. A bundle refused —
// its checksum, a bomb, the limits — is an error, and its chunks are
// dropped with it: nothing of it stays.
func (m *Service) Assemble(ctx context.Context, p *domain.Principal, orgSlug string, req AssembleRequest) (AssembleResult, error) {
	if err := org(p, orgSlug); err != nil {
		return AssembleResult{}, err
	}
	req.Checksum = strings.ToLower(req.Checksum)
	if !validSHA1(req.Checksum) {
		return AssembleResult{}, invalid("bad_checksum", "checksum must be the bundle's SHA-1 (40 hex digits)")
	}
	if len(req.Chunks) == 0 || len(req.Chunks) > maxChunks {
		return AssembleResult{}, invalid("bad_chunks", "chunks must name 1 to %d chunks", maxChunks)
	}
	for i, c := range req.Chunks {
		req.Chunks[i] = strings.ToLower(c)
		if !validSHA1(req.Chunks[i]) {
			return AssembleResult{}, invalid("bad_chunks", "chunk %q is not a SHA-1", clip(c))
		}
	}
	if len(req.Projects) == 0 {
		return AssembleResult{}, invalid("no_project", "projects must name the project the bundle is for (SENTRY_PROJECT)")
	}
	// One assemble per organisation at a time: each reads up to a bundle's
	// worth of chunks; the others wait their turn (a bounded wait).
	var res AssembleResult
	err := m.s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if err := orgLock(ctx, tx, "sourcemap.assemble", p.OrgID); err != nil {
			return err
		}
		var err error
		res, err = m.assemble(ctx, p, req)
		return err
	})
	return res, err
}

// orgLock takes the organisation's transaction-scoped lock of kind,
// waiting at most assembleWait.
func orgLock(ctx context.Context, tx bun.Tx, kind string, orgID uuid.UUID) error {
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d", assembleWait.Milliseconds())); err != nil {
		return fmt.Errorf("sourcemap: lock timeout: %w", err)
	}
	if _, err := tx.NewRaw(`SELECT pg_advisory_xact_lock(hashtextextended(?, 0))`, kind+":"+orgID.String()).Exec(ctx); err != nil {
		if strings.Contains(err.Error(), "55P03") || strings.Contains(err.Error(), "lock timeout") {
			return domain.NewError(domain.ErrConflict, "upload_busy", "another upload of this organisation is being put together; try again in a minute")
		}
		return fmt.Errorf("sourcemap: lock: %w", err)
	}
	return nil
}

// assembleWait bounds the wait for the organisation's assemble lock.
const assembleWait = 60 * time.Second

func (m *Service) assemble(ctx context.Context, p *domain.Principal, req AssembleRequest) (AssembleResult, error) {
	projects := make([]*domain.Project, 0, len(req.Projects))
	for _, slug := range req.Projects {
		pr, err := m.projectBySlug(ctx, p.OrgID, slug)
		if err != nil {
			return AssembleResult{}, err
		}
		projects = append(projects, pr)
	}
	var have int
	if err := m.s.DB.NewRaw(`SELECT count(*) FROM sourcemap_bundles WHERE project_id IN (?) AND checksum = ?`,
		bun.List(projectIDs(projects)), req.Checksum).Scan(ctx, &have); err != nil {
		return AssembleResult{}, fmt.Errorf("sourcemap: bundle lookup: %w", err)
	}
	if have == len(projects) {
		return AssembleResult{State: "ok", MissingChunks: []string{}}, nil
	}

	var stored []struct {
		Checksum string `bun:"checksum"`
		Size     int64  `bun:"size"`
	}
	if err := m.s.DB.NewRaw(`SELECT checksum, length(data) AS size FROM sourcemap_chunks WHERE org_id = ? AND checksum IN (?)`,
		p.OrgID, bun.List(req.Chunks)).Scan(ctx, &stored); err != nil {
		return AssembleResult{}, fmt.Errorf("sourcemap: chunk lookup: %w", err)
	}
	sizes := make(map[string]int64, len(stored))
	for _, s := range stored {
		sizes[s.Checksum] = s.Size
	}
	missing := []string{}
	var total int64
	for _, c := range req.Chunks {
		sz, ok := sizes[c]
		if !ok {
			if !slices.Contains(missing, c) {
				missing = append(missing, c)
			}
			continue
		}
		total += sz
	}
	if len(missing) > 0 {
		detail := fmt.Sprintf("missing_chunks: %d of the bundle's chunks were never sent; nothing was assembled", len(missing))
		return AssembleResult{State: "not_found", MissingChunks: missing, Detail: &detail}, nil
	}
	if total > m.Limits.Bundle {
		m.dropChunks(ctx, p.OrgID, req.Chunks)
		return AssembleResult{}, tooLarge("bundle_too_large", "the bundle holds %d bytes; at most %d (ANVIL_SOURCEMAP_MAX_BUNDLE)", total, m.Limits.Bundle)
	}
	spool, err := m.spool(ctx, p.OrgID, req.Chunks)
	if err != nil {
		return AssembleResult{}, err
	}
	defer func() {
		_ = spool.f.Close()
		_ = os.Remove(spool.f.Name())
	}()
	if spool.sum != req.Checksum {
		m.dropChunks(ctx, p.OrgID, req.Chunks)
		return AssembleResult{}, invalid("bundle_checksum_mismatch", "the chunks put together hash to %s, not the bundle's checksum %s; nothing was stored", spool.sum, req.Checksum)
	}
	b, err := ReadBundleAt(spool.f, spool.size, m.Limits)
	if err != nil {
		m.dropChunks(ctx, p.OrgID, req.Chunks)
		return AssembleResult{}, err
	}
	if req.Version != "" {
		b.Release = req.Version
	}
	if req.Dist != "" {
		b.Dist = req.Dist
	}
	for _, pr := range projects {
		if _, err := m.store(ctx, p, pr.ID, b, req.Checksum, "sentry-cli"); err != nil {
			return AssembleResult{}, err
		}
	}
	m.dropChunks(ctx, p.OrgID, req.Chunks)
	return AssembleResult{State: "ok", MissingChunks: []string{}}, nil
}

func projectIDs(ps []*domain.Project) []uuid.UUID {
	out := make([]uuid.UUID, len(ps))
	for i, p := range ps {
		out[i] = p.ID
	}
	return out
}

// spooled is an assembled bundle in a temporary file, with its SHA-1.
type spooled struct {
	f    *os.File
	size int64
	sum  string
}

// spool writes the chunks in order to a temporary file, one chunk in
// memory at a time, hashing them on the way: a bundle is never held whole.
func (m *Service) spool(ctx context.Context, orgID uuid.UUID, chunks []string) (*spooled, error) {
	f, err := os.CreateTemp("", "anvil-bundle-*.zip")
	if err != nil {
		return nil, fmt.Errorf("sourcemap: spool: %w", err)
	}
	sp := &spooled{f: f}
	h := sha1.New() //nolint:gosec // see the import
	w := io.MultiWriter(f, h)
	for _, c := range chunks {
		var data []byte
		if err := m.s.DB.NewRaw(`SELECT data FROM sourcemap_chunks WHERE org_id = ? AND checksum = ?`, orgID, c).Scan(ctx, &data); err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
			if strings.Contains(err.Error(), "no rows") {
				return nil, invalid("missing_chunks", "chunk %s went away while the bundle was assembled; upload again", c)
			}
			return nil, fmt.Errorf("sourcemap: read chunk: %w", err)
		}
		n, err := w.Write(data)
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
			return nil, fmt.Errorf("sourcemap: spool: %w", err)
		}
		sp.size += int64(n)
	}
	sp.sum = hex.EncodeToString(h.Sum(nil))
	return sp, nil
}

// dropChunks removes the chunks an assemble call took (or refused). A
// failure leaves them to the day-old sweep.
func (m *Service) dropChunks(ctx context.Context, orgID uuid.UUID, chunks []string) {
	if _, err := m.s.DB.NewRaw(`DELETE FROM sourcemap_chunks WHERE org_id = ? AND checksum IN (?)`, orgID, bun.List(chunks)).Exec(ctx); err != nil {
		m.s.Log.Warn("sourcemap: drop chunks", "org_id", orgID, "error", err.Error())
	}
}

func (m *Service) projectBySlug(ctx context.Context, orgID uuid.UUID, slug string) (*domain.Project, error) {
	pr := new(domain.Project)
	err := domain.SelectLiveProjects(m.s.DB, pr).Where("org_id = ? AND slug = ?", orgID, slug).Scan(ctx)
	if err != nil {
		if strings.Contains(err.Error(), "no rows") {
			return nil, domain.NotFound("project")
		}
		return nil, fmt.Errorf("sourcemap: project %q: %w", slug, err)
	}
	return pr, nil
}

// Upload stores plainly uploaded files as one bundle of a release (POST
// /api/private/projects/:id/sourcemaps).
func (m *Service) Upload(ctx context.Context, p *domain.Principal, projectID uuid.UUID, release, dist string, files []PlainFile) (*BundleInfo, error) {
	if err := domain.RequireWrite(p); err != nil {
		return nil, err
	}
	var fe domain.FieldErrors
	release, dist = strings.TrimSpace(release), strings.TrimSpace(dist)
	if release == "" {
		fe.Add("release", "release_required", "is required: the release the files were built for, as the SDK sends it")
	} else if len(release) > 250 {
		fe.Add("release", "release_too_long", "is longer than 250 characters")
	}
	if len(dist) > 64 {
		fe.Add("dist", "dist_too_long", "is longer than 64 characters")
	}
	if len(files) == 0 {
		fe.Add("files", "no_files", "holds no file: send the bundles and their .map files")
	}
	if err := fe.Err(); err != nil {
		return nil, err
	}
	pr := new(domain.Project)
	if err := domain.SelectLiveProjects(m.s.DB, pr).Where("id = ? AND org_id = ?", projectID, p.OrgID).Scan(ctx); err != nil {
		if strings.Contains(err.Error(), "no rows") {
			return nil, domain.NotFound("project")
		}
		return nil, fmt.Errorf("sourcemap: project: %w", err)
	}
	b, err := BundleFromFiles(files, release, dist, m.Limits)
	if err != nil {
		return nil, err
	}
	// The upload's checksum: its files' names and contents, in name order.
	sort.Slice(b.Files, func(i, j int) bool { return b.Files[i].URL < b.Files[j].URL })
	var id bytes.Buffer
	id.WriteString(release + "\x00" + dist + "\x00")
	for _, f := range b.Files {
		id.WriteString(f.URL + "\x00" + f.Checksum + "\x00")
	}
	return m.store(ctx, p, pr.ID, b, sha1Hex(id.Bytes()), "upload")
}

// store writes a checked bundle in the project's transaction: the bundle,
// its files, and each content not yet stored — or nothing, when the
// project's artifacts would go over the project limit.
func (m *Service) store(ctx context.Context, p *domain.Principal, projectID uuid.UUID, b *Bundle, checksum, via string) (*BundleInfo, error) {
	info := &BundleInfo{}
	err := m.s.WithProject(ctx, projectID, func(ctx context.Context, tx bun.Tx, pr *domain.Project) error {
		err := tx.NewRaw(`SELECT id, project_id, release, dist, via, files, bytes, created_at FROM sourcemap_bundles
			WHERE project_id = ? AND checksum = ?`, projectID, checksum).Scan(ctx, info)
		if err == nil {
			return nil // the same bundle again: stored once
		}
		if !strings.Contains(err.Error(), "no rows") {
			return fmt.Errorf("sourcemap: bundle lookup: %w", err)
		}
		sums := make([]string, 0, len(b.Files))
		for _, f := range b.Files {
			sums = append(sums, f.Checksum)
		}
		var known []string
		if err := tx.NewRaw(`SELECT checksum FROM sourcemap_blobs WHERE project_id = ? AND checksum IN (?)`,
			projectID, bun.List(sums)).Scan(ctx, &known); err != nil {
			return fmt.Errorf("sourcemap: blobs: %w", err)
		}
		have := make(map[string]bool, len(known))
		for _, k := range known {
			have[k] = true
		}
		var added int64
		fresh := make(map[string]bool)
		for _, f := range b.Files {
			if !have[f.Checksum] && !fresh[f.Checksum] {
				fresh[f.Checksum] = true
				added += int64(len(f.Data))
			}
		}
		var used int64
		if err := tx.NewRaw(`SELECT coalesce(sum(size), 0) FROM sourcemap_blobs WHERE project_id = ?`, projectID).Scan(ctx, &used); err != nil {
			return fmt.Errorf("sourcemap: usage: %w", err)
		}
		var rows int
		if err := tx.NewRaw(`SELECT count(*) FROM sourcemap_files WHERE project_id = ?`, projectID).Scan(ctx, &rows); err != nil {
			return fmt.Errorf("sourcemap: file rows: %w", err)
		}
		if rows+len(b.Files) > m.Limits.Files {
			return tooLarge("project_over_files", "project %s would name %d files in its uploads; at most %d; older releases' uploads are removed by retention", pr.Slug, rows+len(b.Files), m.Limits.Files)
		}
		if used+added > m.Limits.Project {
			return tooLarge("project_over_limit", "project %s would hold %d bytes of source maps and bundles; at most %d (ANVIL_SOURCEMAP_MAX_PROJECT); older releases' uploads are removed by retention", pr.Slug, used+added, m.Limits.Project)
		}
		if err := tx.NewRaw(`INSERT INTO sourcemap_bundles (org_id, project_id, checksum, release, dist, debug_id, via, files, bytes, created_by)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id, project_id, release, dist, via, files, bytes, created_at`,
			pr.OrgID, projectID, checksum, b.Release, b.Dist, b.DebugID, via, len(b.Files), b.Bytes, p.UserID).Scan(ctx, info); err != nil {
			return fmt.Errorf("sourcemap: insert bundle: %w", err)
		}
		for _, f := range b.Files {
			if fresh[f.Checksum] {
				if _, err := tx.NewRaw(`INSERT INTO sourcemap_blobs (project_id, checksum, size, data) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`,
					projectID, f.Checksum, len(f.Data), f.Data).Exec(ctx); err != nil {
					return fmt.Errorf("sourcemap: insert blob: %w", err)
				}
				fresh[f.Checksum] = false
			}
			if _, err := tx.NewRaw(`INSERT INTO sourcemap_files (bundle_id, project_id, url, kind, debug_id, sourcemap, blob)
				VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
				info.ID, projectID, f.URL, f.Kind, f.DebugID, f.SourceMap, f.Checksum).Exec(ctx); err != nil {
				return fmt.Errorf("sourcemap: insert file: %w", err)
			}
		}
		return domain.RecordAudit(ctx, tx, p, "sourcemaps.upload", pr.Slug, map[string]any{
			"release": b.Release, "dist": b.Dist, "files": len(b.Files), "bytes": b.Bytes, "via": via})
	})
	if err != nil {
		return nil, err
	}
	m.look.forget(projectID)
	return info, nil
}

// Bundles lists a project's uploads, newest first.
func (m *Service) Bundles(ctx context.Context, orgID, projectID uuid.UUID) ([]BundleInfo, error) {
	var out []BundleInfo
	err := m.s.DB.NewRaw(`SELECT id, project_id, release, dist, via, files, bytes, created_at FROM sourcemap_bundles
		WHERE org_id = ? AND project_id = ? ORDER BY created_at DESC LIMIT 200`, orgID, projectID).Scan(ctx, &out)
	return out, err
}

// Usage is the bytes of stored artifacts of each project of the
// organisation (the retention page shows it).
func (m *Service) Usage(ctx context.Context, orgID uuid.UUID) (map[uuid.UUID]int64, error) {
	var rows []struct {
		ProjectID uuid.UUID `bun:"project_id"`
		Bytes     int64     `bun:"bytes"`
	}
	err := m.s.DB.NewRaw(`SELECT b.project_id, sum(b.size) AS bytes FROM sourcemap_blobs b JOIN `+domain.AllProjects+` p ON p.id = b.project_id
		WHERE p.org_id = ? GROUP BY b.project_id`, orgID).Scan(ctx, &rows)
	out := make(map[uuid.UUID]int64, len(rows))
	for _, r := range rows {
		out[r.ProjectID] = r.Bytes
	}
	return out, err
}

func bunIn(ss []string) any { return bun.List(ss) }

// chunkTTL is how long a chunk waits for the assemble call that takes it.
const chunkTTL = 24 * time.Hour

// Expire removes a project's uploads that mapped no frame and were not
// uploaded since cutoff (the project's events retention): an event of
// their release would have used them, so none is coming that needs them
// (docs/sourcemap.md, "Retention"). Contents no upload names any more go
// with them, in the project's transaction; so do the organisation's
// chunks older than a day that no assemble call took.
func (m *Service) Expire(ctx context.Context, projectID uuid.UUID, cutoff time.Time) error {
	err := m.s.WithProject(ctx, projectID, func(ctx context.Context, tx bun.Tx, pr *domain.Project) error {
		if _, err := tx.NewRaw(`DELETE FROM sourcemap_files WHERE bundle_id IN (
			SELECT id FROM sourcemap_bundles WHERE project_id = ? AND last_used_at < ? AND created_at < ?)`, projectID, cutoff, cutoff).Exec(ctx); err != nil {
			return err
		}
		if _, err := tx.NewRaw(`DELETE FROM sourcemap_bundles WHERE project_id = ? AND last_used_at < ? AND created_at < ?`, projectID, cutoff, cutoff).Exec(ctx); err != nil {
			return err
		}
		if _, err := tx.NewRaw(`DELETE FROM sourcemap_blobs b WHERE b.project_id = ?0 AND NOT EXISTS (
			SELECT 1 FROM sourcemap_files f WHERE f.project_id = ?0 AND f.blob = b.checksum)`, projectID).Exec(ctx); err != nil {
			return err
		}
		_, err := tx.NewRaw(`DELETE FROM sourcemap_chunks WHERE org_id = ? AND created_at < ?`, pr.OrgID, time.Now().Add(-chunkTTL)).Exec(ctx)
		return err
	})
	if err != nil {
		return fmt.Errorf("sourcemap: expire %s: %w", projectID, err)
	}
	m.look.forget(projectID)
	return nil
}
