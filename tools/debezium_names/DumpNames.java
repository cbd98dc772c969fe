import io.debezium.config.CommonConnectorConfig;
import io.debezium.relational.TableId;
import io.debezium.schema.SchemaNameAdjuster;
import io.debezium.schema.SchemaTopicNamingStrategy;
import java.util.Properties;

/** Prints, as JSON, what Debezium's name adjusters and topic naming do to a set of names. */
public class DumpNames {
  static String q(String s) {
    StringBuilder b = new StringBuilder("\"");
    for (char c : s.toCharArray()) {
      if (c == '"' || c == '\\') b.append('\\').append(c);
      else if (c < 0x20 || c > 0x7e) b.append(String.format("\\u%04x", (int) c));
      else b.append(c);
    }
    return b.append('"').toString();
  }
  public static void main(String[] args) {
    String[] names = {"my-server.Sales Ö.Order-Items.Value", "pgcdc.public.1st", "Ünit Price",
        "1st-column", "naïve name", "MixedCase", "a.b", "_ok", "9", "a_b", "ab_", "_", "Ö", "a1",
        "x.9y", "a__b", "é_é", "😀x", "a$b", "", "-", "日本語.テーブル"};
    StringBuilder out = new StringBuilder("{\n");
    for (String kind : new String[]{"schema", "field"}) {
      for (String mode : new String[]{"avro", "avro_unicode"}) {
        SchemaNameAdjuster adj = kind.equals("schema")
            ? CommonConnectorConfig.SchemaNameAdjustmentMode.parse(mode).createAdjuster()
            : CommonConnectorConfig.FieldNameAdjustmentMode.parse(mode).createAdjuster();
        out.append("  ").append(q(kind + ":" + mode)).append(": {");
        for (int i = 0; i < names.length; i++) {
          out.append(i == 0 ? "" : ", ").append(q(names[i])).append(": ").append(q(adj.adjust(names[i])));
        }
        out.append("},\n");
      }
    }
    Properties p = new Properties();
    p.put("topic.prefix", "my-server");
    SchemaTopicNamingStrategy strategy = new SchemaTopicNamingStrategy(p);
    String[][] tables = {{"Sales Ö", "Order-Items"}, {"public", "t"}, {"a.b", "c$d"}, {"x", "😀"}, {"日本", "表"}};
    out.append("  \"topic\": {");
    for (int i = 0; i < tables.length; i++) {
      String topic = strategy.dataChangeTopic(new TableId(null, tables[i][0], tables[i][1]));
      out.append(i == 0 ? "" : ", ").append(q(tables[i][0] + "\u0000" + tables[i][1])).append(": ").append(q(topic));
    }
    out.append("}\n}\n");
    System.out.print(out);
  }
}
