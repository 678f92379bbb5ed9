package web

import (
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"anvil/domain"
	"anvil/domain/release"
)

// sentry-cli's releases (docs/releases.md, "sentry-cli"): `releases new`,
// `releases set-commits --commit <repo>@<sha>` and `deploys new`, through
// the same Sentry-style API as the source maps' upload (an anvil API token
// as the bearer; the organisation in the path and the roles are the
// domain's checks).
func (s *Server) registerSentryReleases(e *echo.Echo) {
	g := e.Group("/api/0/organizations/:org", s.authenticate, s.requireAPI, s.requireCSRF)
	for _, slash := range []string{"/", ""} {
		g.GET("/repos"+slash, s.sentryRepos)
		g.POST("/releases"+slash, s.sentryReleaseNew)
		g.PUT("/releases/:version"+slash, s.sentryReleaseUpdate)
		g.POST("/releases/:version/deploys"+slash, s.sentryDeployNew)
	}
}

// sentryRepos: GET /api/0/organizations/{org}/repos/ — what set-commits
// checks `--commit <repo>@<sha>` against.
func (s *Server) sentryRepos(c echo.Context) error {
	rs, err := s.Releases.SentryRepos(c.Request().Context(), principal(c), c.Param("org"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, rs)
}

// sentryReleaseNew: POST /api/0/organizations/{org}/releases/.
func (s *Server) sentryReleaseNew(c echo.Context) error {
	var in release.SentryReleaseInput
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	r, err := s.Releases.SentryNewRelease(c.Request().Context(), principal(c), c.Param("org"), in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, r)
}

// sentryReleaseUpdate: PUT /api/0/organizations/{org}/releases/{version}/.
func (s *Server) sentryReleaseUpdate(c echo.Context) error {
	version, err := versionParam(c)
	if err != nil {
		return err
	}
	var in release.SentryReleaseInput
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	r, err := s.Releases.SentryUpdateRelease(c.Request().Context(), principal(c), c.Param("org"), version, in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, r)
}

// sentryDeployNew: POST /api/0/organizations/{org}/releases/{version}/deploys/.
func (s *Server) sentryDeployNew(c echo.Context) error {
	version, err := versionParam(c)
	if err != nil {
		return err
	}
	var in release.SentryDeployInput
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	d, err := s.Releases.SentryNewDeploy(c.Request().Context(), principal(c), c.Param("org"), version, in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, d)
}

// versionParam is the release's version in the path, which sentry-cli
// percent-encodes ("shop@2.4.0%2Bbuild.7"); the router leaves it encoded.
func versionParam(c echo.Context) (string, error) {
	v, err := url.PathUnescape(c.Param("version"))
	if err != nil {
		return "", domain.Invalid("invalid_version", "the version in the path is not a valid escaped path segment")
	}
	return v, nil
}
