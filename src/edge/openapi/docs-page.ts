/*
 * GET /docs: a static page that renders /openapi.json with Redoc, loaded from a CDN
 * by the reader's browser (the Worker itself fetches nothing). The script is pinned
 * to one version and checked by its Subresource Integrity hash, so a changed file
 * on the CDN is refused rather than run.
 */

/** redoc@2.5.4 `bundles/redoc.standalone.js`, as published on npm. */
export const REDOC_SCRIPT = {
  url: "https://cdn.jsdelivr.net/npm/redoc@2.5.4/bundles/redoc.standalone.js",
  integrity: "sha384-w447zOpYfw/1Tv/5AK9NfHTlQIqE3RVR6KY62jCyy9zNDgO64cMwGGP1Fj0zJVf5",
} as const;

export const DOCUMENT_PATH = "/openapi.json";

export const DOCS_PAGE = `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8">
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <title>Agentix API reference</title>
    <style>body { margin: 0; }</style>
  </head>
  <body>
    <noscript>This page renders the API's OpenAPI document with JavaScript; the document itself is at <a href="${DOCUMENT_PATH}">${DOCUMENT_PATH}</a>.</noscript>
    <redoc spec-url="${DOCUMENT_PATH}"></redoc>
    <script src="${REDOC_SCRIPT.url}" integrity="${REDOC_SCRIPT.integrity}" crossorigin="anonymous"></script>
  </body>
</html>
`;

/**
 * What the page may do: run the pinned script (Redoc compiles a few templates with
 * Function, hence 'unsafe-eval'), start its search worker from a blob, inject its
 * styles, and fetch the document from this origin. No inline script, no framing.
 */
export const DOCS_PAGE_CSP = [
  "default-src 'none'",
  "script-src https://cdn.jsdelivr.net 'unsafe-eval'",
  "worker-src blob:",
  "style-src 'unsafe-inline'",
  "img-src data: https:",
  "font-src data: https:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");
