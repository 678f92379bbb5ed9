package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"anvil/domain"
	"anvil/views"
)

// The worker's image store (docs/images.md): what the settings page and
// the API show of it, and its clear. The store is the host's, shared by
// every organisation whose runs this worker runs: the page shows counts
// and bytes, never which images, and only an owner clears it. A clear
// passes over the images runs are using.
func (s *Server) registerImages(pages, api *echo.Group) {
	pages.POST("/settings/images/clear", s.imagesClearSubmit)
	api.GET("/images", s.apiImages)
	api.POST("/images/clear", s.apiImagesClear)
}

// imagesJSON is GET /api/private/images.
type imagesJSON struct {
	// Here is false when this process runs no workers (role web).
	Here  bool  `json:"here"`
	Count int   `json:"count"`
	Bytes int64 `json:"bytes"`
}

func (s *Server) imageFigures() imagesJSON {
	if s.images == nil {
		return imagesJSON{}
	}
	out := imagesJSON{Here: true}
	for _, e := range s.images.List() {
		out.Count++
		out.Bytes += e.Size
	}
	return out
}

func (s *Server) imagesProps() views.ImagesProps {
	f := s.imageFigures()
	return views.ImagesProps{Here: f.Here, Count: f.Count, Bytes: f.Bytes}
}

func (s *Server) apiImages(c echo.Context) error {
	if err := domain.RequireRole(principal(c), domain.RoleAdmin); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, s.imageFigures())
}

func (s *Server) clearImages(c echo.Context) (int, int64, error) {
	if err := domain.RequireRole(principal(c), domain.RoleOwner); err != nil {
		return 0, 0, err
	}
	if s.images == nil {
		return 0, 0, domain.Conflict("no_image_store", "this process runs no workers: clear the images on a worker (role worker or all)")
	}
	n, b := s.images.Clear()
	s.log.Info("image store cleared", "removed", n, "bytes", b)
	return n, b, nil
}

func (s *Server) apiImagesClear(c echo.Context) error {
	n, b, err := s.clearImages(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"removed": n, "bytes": b})
}

func (s *Server) imagesClearSubmit(c echo.Context) error {
	if _, _, err := s.clearImages(c); err != nil {
		return err
	}
	s.flash(c, "images_cleared")
	return redirect(c, "/settings")
}
