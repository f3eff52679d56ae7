// Starts Swagger UI on /docs (playground/api/docs.py) from the app's own copy of it: a file, not an
// inline script, because the page's Content-Security-Policy allows no inline script.
"use strict";

window.addEventListener("DOMContentLoaded", function () {
  const root = document.getElementById("swagger-ui");
  window.ui = SwaggerUIBundle({
    url: root.dataset.openapiUrl,
    dom_id: "#swagger-ui",
    deepLinking: true,
    layout: "BaseLayout",
    presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
    showCommonExtensions: true,
    // no badge that sends the schema to swagger.io's validator: nothing leaves this host
    validatorUrl: null,
  });
});
