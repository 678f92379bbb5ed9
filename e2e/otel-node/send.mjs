// Reports through the OpenTelemetry Node SDK, unmodified, configured by the
// environment alone (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_HEADERS,
// OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME): one span that records an
// exception, exported over OTLP/HTTP as JSON (@opentelemetry/exporter-trace-otlp-http)
// or protobuf (-proto) as OTLP_ENCODING says. Run by e2e/otlp_node_test.go
// against a real anvil server; it prints the span's ids as JSON.
import { trace, SpanStatusCode } from "@opentelemetry/api";
import { BasicTracerProvider, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { OTLPTraceExporter as JSONExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { OTLPTraceExporter as ProtoExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { defaultResource, detectResources, envDetector } from "@opentelemetry/resources";

const exporter = process.env.OTLP_ENCODING === "proto" ? new ProtoExporter() : new JSONExporter();
const resource = defaultResource().merge(detectResources({ detectors: [envDetector] }));
const provider = new BasicTracerProvider({ resource, spanProcessors: [new SimpleSpanProcessor(exporter)] });
const tracer = provider.getTracer("shop-checkout");

function chargeCart(cart) {
  return cart.total();
}

const span = tracer.startSpan("POST /checkout", { kind: 1 });
try {
  chargeCart(null);
} catch (err) {
  span.recordException(err);
  span.setStatus({ code: SpanStatusCode.ERROR, message: err.message });
}
span.end();
await provider.forceFlush();
await provider.shutdown();
const ctx = span.spanContext();
console.log(JSON.stringify({ traceId: ctx.traceId, spanId: ctx.spanId }));
