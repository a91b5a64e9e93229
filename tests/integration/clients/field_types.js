// The side-by-side field-type run (tests/integration/field_clients.py) with amqplib: the same
// steps as the Python clients, with JS values; prints {"answers": {...}, "own": [...]} as JSON.
// Usage: node field_types.js AMQP_URL
'use strict';
const amqp = require('amqplib');

const url = process.argv[2];
const CASES = {
  bool: true, int: 5, negative: -5, 'int32-max': 2147483647, 'above-int32': 2147483648,
  'celery-ttl': 134217728000, float: 1.5, str: 'héllo', bytes: Buffer.from([0xff, 0x00]),
  decimal: {'!': 'decimal', value: {places: 2, digits: 125}},
  timestamp: {'!': 'timestamp', value: 1704164645},
  int8: {'!': 'int8', value: -1}, uint8: {'!': 'uint8', value: 255}, uint16: {'!': 'uint16', value: 65534},
  uint32: {'!': 'uint32', value: 4294967295}, int64: {'!': 'int64', value: 1099511627776},
  float32: {'!': 'float', value: 0.5}, table: {a: 1, b: 'x'}, array: [1, 'b', null], none: null,
};

// "Operation failed: QueueDeclare; 406 (PRECONDITION-FAILED) with message "...""; 5xx codes
// close the connection, the others the channel
function outcome(err) {
  const m = /(\d+) \([A-Z_-]+\) with message "(.*)"$/s.exec(err.message || '');
  if (m) return [Number(m[1]) >= 500 ? 'connection' : 'channel', Number(m[1]), m[2]];
  return ['dropped'];
}

function plain(v) {
  if (Buffer.isBuffer(v)) return ['bytes', v.toString('hex')];
  if (Array.isArray(v)) return v.map(plain);
  if (v && typeof v === 'object') {
    if (v.hasOwnProperty('!')) return [v['!'], v.value];
    const out = {};
    for (const k of Object.keys(v)) if (k !== 'time') out[k] = plain(v[k]);
    return out;
  }
  return [v === null ? 'null' : typeof v, v];
}

async function main() {
  let conn = await amqp.connect(url);
  conn.on('error', () => {});
  const answers = {};
  let published = 0;
  async function declare(queue, args) {
    let ch;
    try {
      ch = await conn.createChannel();
      ch.on('error', () => {});
      await ch.assertQueue(queue, {durable: false, autoDelete: false, arguments: args});
      await ch.close();
      return ['ok'];
    } catch (err) {
      const o = outcome(err);
      if (o[0] !== 'channel') {
        conn = await amqp.connect(url);
        conn.on('error', () => {});
      }
      return o;
    }
  }
  for (const [name, value] of Object.entries(CASES)) {
    answers[name] = [await declare(`ft.amqplib.${name}.arg`, {k: value}),
                     await declare(`ft.amqplib.${name}.ttl`, {'x-message-ttl': value})];
    const ch = await conn.createConfirmChannel();
    ch.publish('', 'ft.amqplib.src', Buffer.from('x'), {headers: {case: name, k: value}});
    await ch.waitForConfirms();
    await ch.close();
    published += 1;
  }
  const ch = await conn.createChannel();
  const own = [];
  const deadline = Date.now() + 10000;
  while (own.length < published && Date.now() < deadline) {
    const msg = await ch.get('ft.amqplib.own', {noAck: true});
    if (msg) own.push(plain(msg.properties.headers));
    else await new Promise((r) => setTimeout(r, 20));  // polling with a deadline
  }
  await conn.close();
  process.stdout.write(JSON.stringify({answers, own}));
}

main().catch((err) => { console.error(err); process.exit(1); });
