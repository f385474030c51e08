"""The MCP gateway (docs/mcp.md): MCP servers' tools imported into one capability tree
(`importer`), leaves that forward calls to their server (`forward`, over `connections`), and
the tree served to any MCP client (`gateway`, `server_app`, `http_mount`). Built on the
official `mcp` SDK, imported only by these modules."""
