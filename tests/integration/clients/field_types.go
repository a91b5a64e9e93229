// The side-by-side field-type run (tests/integration/field_clients.py) with amqp091-go: the same
// steps as the Python clients, with Go values; prints {"answers": {...}, "own": [...]} as JSON.
// Built in GOPATH mode against Debian's golang-github-rabbitmq-amqp091-go-dev.
// Usage: field_types AMQP_URL
package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

type named struct {
	name  string
	value interface{}
}

var cases = []named{
	{"bool", true}, {"int8", int8(-1)}, {"uint8", byte(255)}, {"int16", int16(-2)}, {"int32", int32(5)},
	{"negative", int32(-5)}, {"int64", int64(1099511627776)}, {"celery-ttl", int64(134217728000)},
	{"float32", float32(0.5)}, {"float64", 1.5}, {"str", "héllo"}, {"bytes", []byte{0xff, 0x00}},
	{"decimal", amqp.Decimal{Scale: 2, Value: 125}},
	{"timestamp", time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)},
	// One key per table: amqp091-go writes a Table by ranging over a Go map, a new order at every
	// encode, and the brokers keep a nested table's order as it came (only the top-level headers
	// are sorted when dead-lettering), so two keys would differ between the two runs half the time.
	{"table", amqp.Table{"a": amqp.Table{"b": "x"}}}, {"array", []interface{}{int32(1), "b", nil}}, {"none", nil},
}

func plain(v interface{}) interface{} {
	switch x := v.(type) {
	case amqp.Table:
		out := map[string]interface{}{}
		for k, e := range x {
			if k != "time" {
				out[k] = plain(e)
			}
		}
		return out
	case []interface{}:
		out := []interface{}{}
		for _, e := range x {
			out = append(out, plain(e))
		}
		return out
	case []byte:
		return []interface{}{"bytes", hex.EncodeToString(x)}
	case time.Time:
		return []interface{}{"time", x.UTC().Unix()}
	case amqp.Decimal:
		return []interface{}{"decimal", x.Scale, x.Value}
	}
	return []interface{}{fmt.Sprintf("%T", v), v}
}

func main() {
	url := os.Args[1]
	conn, err := amqp.Dial(url)
	if err != nil {
		panic(err)
	}
	declare := func(queue string, args amqp.Table) []interface{} {
		ch, err := conn.Channel()
		if err == nil {
			_, err = ch.QueueDeclare(queue, false, false, false, false, args)
		}
		if err == nil {
			ch.Close()
			return []interface{}{"ok"}
		}
		if conn.IsClosed() {
			conn, _ = amqp.Dial(url)
		}
		if e, ok := err.(*amqp.Error); ok && e.Server {
			kind := "channel"
			if e.Code >= 500 {
				kind = "connection"
			}
			return []interface{}{kind, e.Code, e.Reason}
		}
		return []interface{}{"dropped"}
	}
	answers := map[string]interface{}{}
	for _, c := range cases {
		answers[c.name] = []interface{}{declare("ft.amqp091.arg."+c.name, amqp.Table{"k": c.value}),
			declare("ft.amqp091.ttl."+c.name, amqp.Table{"x-message-ttl": c.value})}
		ch, err := conn.Channel()
		if err != nil {
			panic(err)
		}
		ch.Confirm(false)
		confirms := ch.NotifyPublish(make(chan amqp.Confirmation, 1))
		ch.Publish("", "ft.amqp091.src", false, false,
			amqp.Publishing{Headers: amqp.Table{"case": c.name, "k": c.value}, Body: []byte("x")})
		select {
		case <-confirms:
		case <-time.After(10 * time.Second): // a broker that never confirms fails the comparison, not the run
			answers[c.name] = append(answers[c.name].([]interface{}), []interface{}{"no confirm"})
		}
		ch.Close()
	}
	ch, _ := conn.Channel()
	own := []interface{}{}
	deadline := time.Now().Add(10 * time.Second)
	for len(own) < len(cases) && time.Now().Before(deadline) {
		msg, ok, _ := ch.Get("ft.amqp091.own", true)
		if ok {
			own = append(own, plain(msg.Headers))
		} else {
			time.Sleep(20 * time.Millisecond) // polling with a deadline
		}
	}
	conn.Close()
	out, _ := json.Marshal(map[string]interface{}{"answers": answers, "own": own})
	os.Stdout.Write(out)
}
