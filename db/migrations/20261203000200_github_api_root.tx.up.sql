-- provider_api_url of a GitHub project is now the REST API's root, used as is by
-- every forge call (docs/forgeapi.md). Before, statuses and "run the latest
-- commit" appended /api/v3/ to a bare host (go-github's WithEnterpriseURLs):
-- a project that named only the host (https://ghe.example) keeps reaching the
-- same API for them, and now its pull requests do too.
UPDATE projects
SET provider_api_url = rtrim(provider_api_url, '/') || '/api/v3'
WHERE provider = 'github'
  AND provider_api_url ~ '^https?://[^/?#]+/?$';
