"""The dashboard and human console: static files (HTML, JS modules, CSS) that api/ serves."""
