"""The web console at `/ui`: static pages (HTML, CSS, ES modules; no build step, nothing from a
CDN) that call the same API as any client, plus the read-only catalog views they need."""
