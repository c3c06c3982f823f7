import { Hono } from "hono";
import type { EdgeEnv } from "../context.js";
import { DOCS_PAGE, DOCS_PAGE_CSP, DOCUMENT_PATH } from "../openapi/docs-page.js";
import { buildDocument, type OpenApiDocument } from "../openapi/document.js";
import { DOCUMENT_SPEC } from "../openapi/operations.js";

let built: OpenApiDocument | undefined;

/** The API's OpenAPI document, built from the zod schemas once per isolate. */
export function openApiDocument(): OpenApiDocument {
  built ??= buildDocument(DOCUMENT_SPEC);
  return built;
}

/** GET /openapi.json and GET /docs: public, no auth, no config needed. */
export function openApiRoutes() {
  const routes = new Hono<EdgeEnv>();

  routes.get(DOCUMENT_PATH, (c) => {
    // The server is the origin the document was asked of, so "try it" tools call this deployment.
    const document: OpenApiDocument = { ...openApiDocument(), servers: [{ url: new URL(c.req.url).origin }] };
    c.header("cache-control", "public, max-age=300");
    return c.json(document);
  });

  routes.get("/docs", (c) => {
    c.header("content-security-policy", DOCS_PAGE_CSP);
    c.header("x-content-type-options", "nosniff");
    c.header("referrer-policy", "no-referrer");
    c.header("cache-control", "public, max-age=300");
    return c.html(DOCS_PAGE);
  });

  return routes;
}
