package web

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/labstack/echo/v4"

	"anvil/domain"
	"anvil/domain/sourcemap"
)

// Source maps (docs/sourcemap.md): the parts of Sentry's web API
// that `sentry-cli sourcemaps upload` calls, under /api/0/, with an anvil
// API token as the bearer; and a plain multipart upload in the private API.

// registerSourceMaps adds the routes. The /api/0 group takes a bearer token
// (or a session with its CSRF token); roles and organisation checks are
// the domain's.
func (s *Server) registerSourceMaps(e *echo.Echo, api *echo.Group) {
	g := e.Group("/api/0", s.authenticate, s.requireAPI, s.requireCSRF)
	for _, p := range []string{"/organizations/:org/chunk-upload/", "/organizations/:org/chunk-upload"} {
		g.GET(p, s.sentryChunkOptions)
		g.POST(p, s.sentryChunkUpload)
	}
	for _, p := range []string{"/organizations/:org/artifactbundle/assemble/", "/organizations/:org/artifactbundle/assemble"} {
		g.POST(p, s.sentryAssemble)
	}
	api.POST("/projects/:projectId/sourcemaps", s.apiSourceMapUpload)
	api.GET("/projects/:projectId/sourcemaps", s.apiSourceMapList)
}

// sentryChunkOptions: GET /api/0/organizations/{org}/chunk-upload/ — the
// options sentry-cli reads before it uploads (its ChunkServerOptions).
func (s *Server) sentryChunkOptions(c echo.Context) error {
	p := principal(c)
	if p == nil || p.OrgSlug != c.Param("org") {
		return domain.NotFound("organization")
	}
	// The URL is the configured ANVIL_PUBLIC_URL, never one built from the
	// request's Host header: the CLI sends its chunks, with its token, to
	// whatever this names (docs/sourcemap.md, "Uploading with sentry-cli").
	base := strings.TrimRight(s.opts.PublicURL, "/")
	return c.JSON(http.StatusOK, map[string]any{
		"url":              base + "/api/0/organizations/" + p.OrgSlug + "/chunk-upload/",
		"chunkSize":        sourcemap.ChunkSize,
		"chunksPerRequest": sourcemap.ChunksPerRequest,
		"maxFileSize":      s.SourceMaps.Limits.Bundle,
		"maxRequestSize":   sourcemap.MaxRequestSize,
		"maxWait":          60,
		"concurrency":      4,
		"hashAlgorithm":    "sha1",
		"compression":      []string{"gzip"},
		"accept":           []string{"artifact_bundles", "sources"},
	})
}

// sentryChunkUpload: POST /api/0/organizations/{org}/chunk-upload/ —
// multipart parts named file (or file_gzip, gzipped), each part's file name
// the chunk's SHA-1.
func (s *Server) sentryChunkUpload(c echo.Context) error {
	req := c.Request()
	mt, params, err := mime.ParseMediaType(req.Header.Get(echo.HeaderContentType))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return domain.Invalid("not_multipart", "chunks are sent as multipart/form-data parts named file or file_gzip")
	}
	body := http.MaxBytesReader(c.Response(), req.Body, sourcemap.MaxRequestSize+1<<20)
	mr := multipart.NewReader(body, params["boundary"])
	var chunks []sourcemap.Chunk
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return tooLargeOr(err, "the chunk request is not readable multipart: "+err.Error())
		}
		name := part.FormName()
		if name != "file" && name != "file_gzip" {
			_ = part.Close()
			continue
		}
		if len(chunks) >= sourcemap.ChunksPerRequest {
			return domain.NewError(sourcemap.ErrTooLarge, "too_many_chunks", "at most %d chunks a request", sourcemap.ChunksPerRequest)
		}
		r := io.LimitReader(part, sourcemap.ChunkSize+1)
		if name == "file_gzip" {
			zr, err := gzip.NewReader(part)
			if err != nil {
				return domain.Invalid("chunk_bad_gzip", "chunk %s is not gzip", domain.ClipString(part.FileName(), 64))
			}
			r = io.LimitReader(zr, sourcemap.ChunkSize+1)
		}
		data, err := io.ReadAll(r)
		if err != nil {
			return tooLargeOr(err, "chunk "+domain.ClipString(part.FileName(), 64)+" cannot be read")
		}
		if len(data) > sourcemap.ChunkSize {
			return domain.NewError(sourcemap.ErrTooLarge, "chunk_too_large", "a chunk holds more than %d bytes", sourcemap.ChunkSize)
		}
		chunks = append(chunks, sourcemap.Chunk{Checksum: strings.ToLower(part.FileName()), Data: data})
	}
	if err := s.SourceMaps.PutChunks(req.Context(), principal(c), c.Param("org"), chunks); err != nil {
		return err
	}
	return c.NoContent(http.StatusOK)
}

// tooLargeOr is 413 for a body over the bound, else a 422 with msg.
func tooLargeOr(err error, msg string) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return domain.NewError(sourcemap.ErrTooLarge, "request_too_large", "the request is above %d bytes", mbe.Limit)
	}
	return domain.Invalid("bad_multipart", "%s", domain.ClipString(msg, 200))
}

// sentryAssemble: POST /api/0/organizations/{org}/artifactbundle/assemble/.
func (s *Server) sentryAssemble(c echo.Context) error {
	var in sourcemap.AssembleRequest
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	res, err := s.SourceMaps.Assemble(c.Request().Context(), principal(c), c.Param("org"), in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, res)
}

// apiSourceMapUpload: POST /api/private/projects/:projectId/sourcemaps,
// multipart {release, dist?, files…} → 201 the stored bundle.
func (s *Server) apiSourceMapUpload(c echo.Context) error {
	id, err := s.projectIDParam(c)
	if err != nil {
		return err
	}
	req := c.Request()
	mt, params, err := mime.ParseMediaType(req.Header.Get(echo.HeaderContentType))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return domain.Invalid("not_multipart", "send multipart/form-data: release, optional dist, and the files")
	}
	lim := s.SourceMaps.Limits
	body := http.MaxBytesReader(c.Response(), req.Body, lim.Bundle+1<<20)
	mr := multipart.NewReader(body, params["boundary"])
	var (
		release, dist string
		files         []sourcemap.PlainFile
	)
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return tooLargeOr(err, "the upload is not readable multipart: "+err.Error())
		}
		if part.FileName() == "" {
			v, err := io.ReadAll(io.LimitReader(part, 1024))
			if err != nil {
				return tooLargeOr(err, "a field cannot be read")
			}
			switch part.FormName() {
			case "release":
				release = string(v)
			case "dist":
				dist = string(v)
			}
			continue
		}
		var buf bytes.Buffer
		n, err := io.Copy(&buf, io.LimitReader(part, lim.File+1))
		if err != nil {
			return tooLargeOr(err, "a file cannot be read")
		}
		if n > lim.File {
			return domain.NewError(sourcemap.ErrTooLarge, "file_too_large", "%s holds more than %d bytes (ANVIL_SOURCEMAP_MAX_FILE)",
				domain.ClipString(part.FileName(), 120), lim.File)
		}
		files = append(files, sourcemap.PlainFile{Name: part.FileName(), Data: buf.Bytes()})
	}
	info, err := s.SourceMaps.Upload(req.Context(), principal(c), id, release, dist, files)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, info)
}

// apiSourceMapList: GET /api/private/projects/:projectId/sourcemaps.
func (s *Server) apiSourceMapList(c echo.Context) error {
	id, err := s.projectIDParam(c)
	if err != nil {
		return err
	}
	p := principal(c)
	if _, err := s.Projects.Get(c.Request().Context(), p.OrgID, id); err != nil {
		return err
	}
	bs, err := s.SourceMaps.Bundles(c.Request().Context(), p.OrgID, id)
	if err != nil {
		return fmt.Errorf("sourcemap list: %w", err)
	}
	if bs == nil {
		bs = []sourcemap.BundleInfo{}
	}
	return c.JSON(http.StatusOK, map[string]any{"uploads": bs})
}
