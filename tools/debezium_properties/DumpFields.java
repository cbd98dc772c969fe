import io.debezium.config.Field;
import java.lang.reflect.Modifier;
import java.util.LinkedHashMap;
import java.util.Map;

/** Prints every configuration Field the Debezium PostgreSQL connector declares, as TSV. */
public class DumpFields {
  public static void main(String[] args) throws Exception {
    Map<String, Field> fields = new LinkedHashMap<>();
    for (Field f : io.debezium.connector.postgresql.PostgresConnectorConfig.ALL_FIELDS) fields.put(f.name(), f);
    String[] classes = {
      "io.debezium.config.CommonConnectorConfig",
      "io.debezium.relational.RelationalDatabaseConnectorConfig",
      "io.debezium.connector.postgresql.PostgresConnectorConfig",
      "io.debezium.schema.AbstractTopicNamingStrategy",
      "io.debezium.heartbeat.HeartbeatConnectionProvider",
      "io.debezium.heartbeat.Heartbeat",
      "io.debezium.heartbeat.HeartbeatImpl",
      "io.debezium.config.ConfigurationNames",
    };
    for (String name : classes) {
      Class<?> c;
      try { c = Class.forName(name); } catch (ClassNotFoundException e) { continue; }
      for (java.lang.reflect.Field jf : c.getDeclaredFields()) {
        if (Modifier.isStatic(jf.getModifiers()) && Field.class.isAssignableFrom(jf.getType())) {
          jf.setAccessible(true);
          Field f = (Field) jf.get(null);
          if (f != null) fields.putIfAbsent(f.name(), f);
        }
      }
    }
    for (Field f : fields.values()) {
      Object d = f.defaultValue();
      String desc = f.description() == null ? "" : f.description().replaceAll("\\s+", " ");
      System.out.println(f.name() + "\t" + (d == null ? "" : d.toString()) + "\t" + f.type() + "\t" + desc);
    }
  }
}
