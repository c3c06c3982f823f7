import http from "node:http";
import type { AddressInfo } from "node:net";

/*
 * The floor a Node proxy can reach on this machine: a plain `node:http` server that
 * forwards each request to the engine over a keep-alive agent and pipes the answer
 * back, with no parsing, auth, queueing or metrics. Measured in the same run as the
 * pool so the pool's cost reads as "what Agentix adds over any Node hop".
 */

export interface NodeProxyHandle {
  url: string;
  close(): Promise<void>;
}

export async function startMinimalNodeProxy(engineUrl: string): Promise<NodeProxyHandle> {
  const engine = new URL(engineUrl);
  const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
  const server = http.createServer((req, res) => {
    const upstream = http.request(
      {
        host: engine.hostname,
        port: engine.port,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, host: engine.host },
        agent,
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on("error", (error) => {
      if (!res.headersSent) res.writeHead(502, { "content-type": "text/plain" });
      res.end(`upstream error: ${error.message}`);
    });
    req.pipe(upstream);
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        agent.destroy();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
