package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"anvil/domain/runcache"
	"anvil/views"
)

// registerRunCaches adds a project's cache between runs (domain/runcache,
// docs/caches.md): the card on the project page clears it, and the API
// reads and clears it.
func (s *Server) registerRunCaches(_ *echo.Echo, pages, api *echo.Group) {
	pages.POST("/projects/:projectId/cache/clear", s.cacheClearSubmit)

	api.GET("/projects/:projectId/cache", s.apiCacheGet)
	api.DELETE("/projects/:projectId/cache", s.apiCacheClear)
}

func (s *Server) caches() *runcache.Service { return runcache.New(s.Store, s.opts.RunCacheMaxBytes) }

// cacheProps is the project page's Cache card.
func (s *Server) cacheProps(c echo.Context, st runcache.Status, slug string) views.CacheProps {
	return views.CacheProps{ProjectSlug: slug, Bytes: humanBytes(st.Bytes), Max: humanBytes(st.MaxBytes), Off: st.MaxBytes == 0,
		UsedAt: st.UsedAt, ClearedAt: st.ClearedAt, CanClear: principal(c).CanWrite(), CSRF: s.csrfToken(principal(c))}
}

// cacheClearSubmit clears the project's cache and shows its page again.
func (s *Server) cacheClearSubmit(c echo.Context) error {
	p, err := s.projectParam(c)
	if err != nil {
		return err
	}
	if _, err := s.caches().Clear(c.Request().Context(), principal(c), p.ID); err != nil {
		return err
	}
	s.flash(c, "cache_cleared")
	return redirect(c, "/projects/"+p.Slug)
}

func (s *Server) apiCacheGet(c echo.Context) error {
	p, err := s.projectParam(c)
	if err != nil {
		return err
	}
	st, err := s.caches().Status(c.Request().Context(), principal(c), p.ID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, st)
}

// apiCacheClear answers 202: the workers erase the directories after the
// answer (a job, and every worker before a run next uses its copy).
func (s *Server) apiCacheClear(c echo.Context) error {
	p, err := s.projectParam(c)
	if err != nil {
		return err
	}
	st, err := s.caches().Clear(c.Request().Context(), principal(c), p.ID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, st)
}
