package otlp_test

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"anvil/domain/otlp"
)

// The stack trace texts the OTel SDKs write into exception.stacktrace, one
// per language, read into frames with the crash site first.
func TestParseStack(t *testing.T) {
	t.Parallel()
	cases := []struct {
		lang, text string
		want       []otlp.Frame // the first frames, in order
		n          int
	}{
		{"java", "java.lang.IllegalStateException: cart is null\n" +
			"\tat com.acme.shop.Checkout.charge(Checkout.java:88)\n" +
			"\tat com.acme.shop.Api.lambda$post$0(Api.java:31)\n" +
			"\tat java.base/java.util.concurrent.ThreadPoolExecutor.runWorker(ThreadPoolExecutor.java:1144)\n" +
			"\tat java.base/java.lang.Thread.run(Native Method)\n" +
			"Caused by: java.io.IOException: closed\n\tat com.acme.shop.Db.read(Db.java:12)\n\t... 3 more\n",
			[]otlp.Frame{{File: "Checkout.java", Function: "com.acme.shop.Checkout.charge", Line: 88, InApp: true},
				{File: "Api.java", Function: "com.acme.shop.Api.lambda$post$0", Line: 31, InApp: true},
				{File: "ThreadPoolExecutor.java", Function: "java.util.concurrent.ThreadPoolExecutor.runWorker", Line: 1144},
				{Function: "java.lang.Thread.run"}}, 5},
		{"python", "Traceback (most recent call last):\n" +
			"  File \"/usr/lib/python3.12/site-packages/flask/app.py\", line 880, in full_dispatch_request\n    rv = self.dispatch_request()\n" +
			"  File \"/app/shop/checkout.py\", line 42, in charge\n    total = cart.total()\n" +
			"AttributeError: 'NoneType' object has no attribute 'total'\n",
			[]otlp.Frame{{File: "/app/shop/checkout.py", Function: "charge", Line: 42, ContextCode: "total = cart.total()", InApp: true},
				{File: "/usr/lib/python3.12/site-packages/flask/app.py", Function: "full_dispatch_request", Line: 880, ContextCode: "rv = self.dispatch_request()"}}, 2},
		{"go", "goroutine 7 [running]:\n" +
			"go.opentelemetry.io/otel/sdk/trace.recordStackTrace()\n\t/root/go/pkg/mod/go.opentelemetry.io/otel/sdk@v1.47.0/trace/span.go:552 +0x5d\n" +
			"main.(*Shop).charge(0xc000012345, {0x1, 0x2})\n\t/app/shop.go:88 +0x1d\n" +
			"main.main()\n\t/app/main.go:12 +0x25\n" +
			"created by net/http.(*Server).Serve in goroutine 1\n\t/usr/local/go/src/net/http/server.go:3285 +0x4b4\n",
			[]otlp.Frame{{File: "/root/go/pkg/mod/go.opentelemetry.io/otel/sdk@v1.47.0/trace/span.go", Function: "go.opentelemetry.io/otel/sdk/trace.recordStackTrace", Line: 552},
				{File: "/app/shop.go", Function: "main.(*Shop).charge", Line: 88, InApp: true},
				{File: "/app/main.go", Function: "main.main", Line: 12, InApp: true},
				{File: "/usr/local/go/src/net/http/server.go", Function: "net/http.(*Server).Serve", Line: 3285}}, 4},
		{"nodejs", "TypeError: Cannot read properties of null (reading 'total')\n" +
			"    at charge (/app/src/checkout.js:42:17)\n" +
			"    at async Router.handle (/app/node_modules/express/lib/router/index.js:284:7)\n" +
			"    at /app/src/server.js:9:3\n" +
			"    at process.processTicksAndRejections (node:internal/process/task_queues:95:5)\n",
			[]otlp.Frame{{File: "/app/src/checkout.js", Function: "charge", Line: 42, Col: 17, InApp: true},
				{File: "/app/node_modules/express/lib/router/index.js", Function: "Router.handle", Line: 284, Col: 7},
				{File: "/app/src/server.js", Function: "<anonymous>", Line: 9, Col: 3, InApp: true},
				{File: "node:internal/process/task_queues", Function: "process.processTicksAndRejections", Line: 95, Col: 5}}, 4},
		{"dotnet", "System.InvalidOperationException: cart is null\n" +
			"   at Acme.Shop.Checkout.Charge(Int32 cents) in /src/Shop/Checkout.cs:line 88\n" +
			"   at Acme.Shop.Api.<>c.<Post>b__0_0() in /src/Shop/Api.cs:line 31\n" +
			"   at System.Threading.ExecutionContext.RunInternal(ExecutionContext executionContext)\n",
			[]otlp.Frame{{File: "/src/Shop/Checkout.cs", Function: "Acme.Shop.Checkout.Charge(Int32 cents)", Line: 88, InApp: true},
				{File: "/src/Shop/Api.cs", Function: "Acme.Shop.Api.<>c.<Post>b__0_0()", Line: 31, InApp: true},
				{Function: "System.Threading.ExecutionContext.RunInternal(ExecutionContext executionContext)"}}, 3},
		{"ruby", "/app/lib/checkout.rb:42:in `charge': cart is nil (RuntimeError)\n" +
			"\tfrom /usr/local/bundle/gems/rack-3.0.8/lib/rack/builder.rb:12:in 'Rack::Builder#call'\n" +
			"\tfrom /app/config.ru:3:in `block in <main>'\n",
			[]otlp.Frame{{File: "/app/lib/checkout.rb", Function: "charge", Line: 42, InApp: true},
				{File: "/usr/local/bundle/gems/rack-3.0.8/lib/rack/builder.rb", Function: "Rack::Builder#call", Line: 12},
				{File: "/app/config.ru", Function: "block in <main>", Line: 3, InApp: true}}, 3},
	}
	for _, tc := range cases {
		for _, lang := range []string{tc.lang, ""} { // with the SDK's language and without
			got := otlp.ParseStack(tc.text, lang)
			if len(got) != tc.n {
				t.Fatalf("%s (lang %q): %d frames, want %d: %+v", tc.lang, lang, len(got), tc.n, got)
			}
			for i, w := range tc.want {
				if got[i] != w {
					t.Fatalf("%s (lang %q) frame %d:\n got %+v\nwant %+v", tc.lang, lang, i, got[i], w)
				}
			}
		}
	}
	if f := otlp.ParseStack("cart is null", "java"); len(f) != 0 {
		t.Fatalf("a message is no stack: %+v", f)
	}
}

// FuzzParseStack: whatever the text, the parser ends within a bounded
// time, returns at most MaxFrames frames, and every field comes from one
// line of at most MaxLineBytes.
func FuzzParseStack(f *testing.F) {
	for _, s := range []string{"\tat a.B.c(B.java:1)\n", "  File \"x.py\", line 1, in f\n    x\n", "main.f()\n\t/a.go:1 +0x1\n",
		"    at f (/a.js:1:2)\n", "   at A.B() in /a.cs:line 1\n", "/a.rb:1:in `f'\n", strings.Repeat("at ", 5000)} {
		f.Add(s, "")
	}
	f.Fuzz(func(t *testing.T, text, lang string) {
		start := time.Now()
		frames := otlp.ParseStack(text, lang)
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("took %v for %d bytes", d, len(text))
		}
		if len(frames) > otlp.MaxFrames {
			t.Fatalf("%d frames", len(frames))
		}
		for _, fr := range frames {
			if len(fr.File) > otlp.MaxLineBytes || len(fr.Function) > otlp.MaxLineBytes || len(fr.ContextCode) > otlp.MaxLineBytes || fr.Line < 0 || fr.Col < 0 {
				t.Fatalf("frame out of bounds: %+v", fr)
			}
			if utf8.ValidString(text) && (!utf8.ValidString(fr.File) || !utf8.ValidString(fr.Function)) {
				t.Fatalf("a frame of valid text is not valid text: %+v", fr)
			}
		}
	})
}

// A stack trace of many frames on long lines stays within the bounds.
func TestParseStackBounded(t *testing.T) {
	t.Parallel()
	text := strings.Repeat("\tat com.acme.A.b(A.java:1)\n", 10*otlp.MaxFrames) + strings.Repeat("x", 1<<20)
	start := time.Now()
	got := otlp.ParseStack(text, "")
	if len(got) != otlp.MaxFrames || time.Since(start) > 2*time.Second {
		t.Fatalf("%d frames in %v", len(got), time.Since(start))
	}
}
