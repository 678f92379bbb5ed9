package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"anvil/domain"
	"anvil/domain/imagestore"
	"anvil/views"
)

// The workers' image stores (docs/images.md, "The store"): what the
// settings page and the API show of them, and their clear. Each worker
// reports its store to the database (domain/imagestore), so any process —
// a web-only one too — shows every store and takes a clear that every
// worker carries out. A store is the host's, shared by every organisation
// whose runs its worker runs: the page shows counts and bytes, never which
// images; admins read them and only an owner clears. A clear passes over
// the images runs are using.
func (s *Server) registerImages(pages, api *echo.Group) {
	pages.POST("/settings/images/clear", s.imagesClearSubmit)
	api.GET("/images", s.apiImages)
	api.POST("/images/clear", s.apiImagesClear)
}

// imagesJSON is GET /api/private/images.
type imagesJSON struct {
	// Here is true when this process has a store of its own (it runs
	// workers); kept for the clients that read it before the stores were
	// listed.
	Here bool `json:"here"`
	imagestore.Status
}

func (s *Server) apiImages(c echo.Context) error {
	st, err := s.ImageStores.Status(c.Request().Context(), principal(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, imagesJSON{Here: s.images != nil, Status: st})
}

// imagesProps is the settings page's section: the stores for admins and
// up, a sentence for the others.
func (s *Server) imagesProps(c echo.Context) (views.ImagesProps, error) {
	p := principal(c)
	out := views.ImagesProps{Every: imagestore.Every}
	if domain.RequireRole(p, domain.RoleAdmin) != nil {
		return out, nil
	}
	st, err := s.ImageStores.Status(c.Request().Context(), p)
	if err != nil {
		return out, err
	}
	out.Shown, out.Count, out.Bytes = true, st.Count, st.Bytes
	if st.ClearRequestedAt != nil {
		out.ClearRequestedAt = *st.ClearRequestedAt
	}
	for _, x := range st.Stores {
		out.Stores = append(out.Stores, views.ImageStoreRow{Host: x.Host, Images: x.Images, Bytes: x.Bytes, CapBytes: x.CapBytes,
			UpdatedAt: x.UpdatedAt, Stale: x.Stale, ClearPending: x.ClearPending})
	}
	return out, nil
}

func (s *Server) apiImagesClear(c echo.Context) error {
	req, err := s.ImageStores.RequestClear(c.Request().Context(), principal(c))
	if err != nil {
		return err
	}
	s.log.Info("image stores' clear requested", "stores", req.Stores)
	return c.JSON(http.StatusAccepted, req)
}

func (s *Server) imagesClearSubmit(c echo.Context) error {
	req, err := s.ImageStores.RequestClear(c.Request().Context(), principal(c))
	if err != nil {
		return err
	}
	s.log.Info("image stores' clear requested", "stores", req.Stores)
	s.flash(c, "images_cleared")
	return redirect(c, "/settings")
}
