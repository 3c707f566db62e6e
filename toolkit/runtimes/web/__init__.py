"""The browser as a runtime: exported files in MediaPipe Tasks, LiteRT.js and onnxruntime-web,
run in headless Chromium from a local server."""
