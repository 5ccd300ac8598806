// An independent MCP client for the Bindery adapter (the TypeScript SDK): it reads the
// bindings, acknowledges them (a stale digest first), subscribes in the protocol generation it
// negotiated, and prints one JSON line per event on stdout until it has seen N updates of
// bindery://bindings, then reads the bindings again and exits.
//
//   node probe.mjs URL legacy|auto N
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const [url, mode, count] = process.argv.slice(2);
const wanted = Number(count);
const BINDINGS = 'bindery://bindings';
const print = (line) => process.stdout.write(JSON.stringify(line) + '\n');

const client = new Client(
    { name: 'bindery-probe', version: '1.0.0' },
    { versionNegotiation: { mode } },
);
let updates = 0;
let done;
const finished = new Promise((resolve) => { done = resolve; });
client.setNotificationHandler('notifications/resources/list_changed', () => {
    print({ notification: 'notifications/resources/list_changed', at: Date.now() });
});
client.setNotificationHandler('notifications/resources/updated', (n) => {
    print({ notification: 'notifications/resources/updated', uri: n.params.uri, at: Date.now() });
    if (n.params.uri === BINDINGS && ++updates >= wanted) done();
});

await client.connect(new StreamableHTTPClientTransport(new URL(url)));
const version = client.getNegotiatedProtocolVersion();
const listed = await client.listResources();
const read = await client.readResource({ uri: BINDINGS });
const tools = await client.listTools();
const bindings = await client.callTool({ name: 'bindery_bindings', arguments: {} });
const digest = bindings.structuredContent.digest;
const stale = await client.callTool({
    name: 'bindery_acknowledge', arguments: { digest: 'sha256:' + '0'.repeat(64) },
});
const acknowledged = await client.callTool({ name: 'bindery_acknowledge', arguments: { digest } });
if (version >= '2026-07-28') {
    await client.listen({ resourcesListChanged: true, resourceSubscriptions: [BINDINGS] });
} else {
    await client.subscribeResource({ uri: BINDINGS });
}
print({
    ready: true,
    protocolVersion: version,
    resources: listed.resources.map((r) => ({ uri: r.uri, name: r.name, meta: r._meta })),
    text: read.contents[0].text,
    tools: tools.tools.map((t) => t.name),
    digest,
    staleIsError: stale.isError === true,
    staleText: stale.content[0].text,
    acknowledgedIsError: acknowledged.isError === true,
});
if (wanted > 0) await finished;
const again = await client.callTool({ name: 'bindery_bindings', arguments: {} });
print({ final: again.structuredContent.digest });
await client.close();
process.exit(0);
