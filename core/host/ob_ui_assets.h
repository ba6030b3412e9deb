/* ob_ui_assets.h -- the web app of `obelus ui` (ui/index.html, app.css, app.js), built
 * into the library: ui/embed.lua makes them into build/gen/ob_ui_assets.c at build time.
 * `obelus ui` serves them; `obelus report` puts app.css and app.js inline in its page. */
#ifndef OB_UI_ASSETS_H
#define OB_UI_ASSETS_H

#include <stddef.h>

/* The file of a request's path ("/", "/index.html", "/app.css", "/app.js"): 1 with its
 * content type, its bytes (NUL-terminated, static) and their length; 0 for any other
 * path. */
int ob_ui_asset(const char *path, const char **type, const char **data, size_t *len);

#endif
