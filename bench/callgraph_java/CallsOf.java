import com.sun.source.tree.ClassTree;
import com.sun.source.tree.CompilationUnitTree;
import com.sun.source.tree.ExpressionTree;
import com.sun.source.tree.IdentifierTree;
import com.sun.source.tree.MemberSelectTree;
import com.sun.source.tree.MethodInvocationTree;
import com.sun.source.tree.MethodTree;
import com.sun.source.tree.NewClassTree;
import com.sun.source.tree.ParenthesizedTree;
import com.sun.source.tree.Tree;
import com.sun.source.util.JavacTask;
import com.sun.source.util.TreePath;
import com.sun.source.util.TreePathScanner;
import com.sun.source.util.Trees;

import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import javax.lang.model.element.Element;
import javax.lang.model.element.ElementKind;
import javax.lang.model.element.ExecutableElement;
import javax.lang.model.element.TypeElement;
import javax.tools.Diagnostic;
import javax.tools.DiagnosticCollector;
import javax.tools.JavaCompiler;
import javax.tools.JavaFileObject;
import javax.tools.StandardJavaFileManager;
import javax.tools.ToolProvider;

/**
 * The compiler's call graph of a set of Java sources (codemem's bench/callgraph_java.py).
 *
 * <p>Usage: {@code java CallsOf FILE_LIST}, where FILE_LIST holds one source path a line.
 * Parses and attributes every file with javac (errors, e.g. for missing dependencies, do not stop
 * attribution) and prints tab-separated lines:
 * <ul>
 *   <li>{@code T <file> <type>}: a type declared in the sources (qualified name);</li>
 *   <li>{@code C <file> <line> <caller type> <caller member> <callee type> <callee member> <form>}:
 *       a call site inside a method or constructor body; constructors are {@code <init>};</li>
 *   <li>{@code U <file> <line> <caller type> <caller member> <form>}: a call site javac could
 *       not attribute;</li>
 *   <li>{@code E <count>}: the number of compile errors.</li>
 * </ul>
 * A call inside a lambda belongs to the method around it; one inside an anonymous or local class
 * to the named class's method around that class.
 */
public final class CallsOf {
    private CallsOf() {
    }

    public static void main(String[] args) throws Exception {
        List<String> paths = new ArrayList<>();
        for (String line : Files.readAllLines(Path.of(args[0]), StandardCharsets.UTF_8)) {
            if (!line.isBlank()) {
                paths.add(line.strip());
            }
        }
        JavaCompiler compiler = ToolProvider.getSystemJavaCompiler();
        DiagnosticCollector<JavaFileObject> diagnostics = new DiagnosticCollector<>();
        StandardJavaFileManager files = compiler.getStandardFileManager(diagnostics, null, StandardCharsets.UTF_8);
        Iterable<? extends JavaFileObject> units = files.getJavaFileObjectsFromStrings(paths);
        List<String> options = List.of("-proc:none", "-Xlint:none", "-encoding", "UTF-8", "-Xmaxerrs", "100000");
        JavacTask task = (JavacTask) compiler.getTask(null, files, diagnostics, options, null, units);
        Iterable<? extends CompilationUnitTree> parsed = task.parse();
        task.analyze();
        Trees trees = Trees.instance(task);
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        for (CompilationUnitTree unit : parsed) {
            new Scanner(trees, unit, out).scan(new TreePath(unit), null);
        }
        long errors = diagnostics.getDiagnostics().stream().filter(d -> d.getKind() == Diagnostic.Kind.ERROR).count();
        out.println("E\t" + errors);
        out.flush();
    }

    /** Visits the declared types and the call sites of one compilation unit. */
    private static final class Scanner extends TreePathScanner<Void, Void> {
        private final Trees trees;
        private final CompilationUnitTree unit;
        private final PrintStream out;

        Scanner(Trees trees, CompilationUnitTree unit, PrintStream out) {
            this.trees = trees;
            this.unit = unit;
            this.out = out;
        }

        @Override
        public Void visitClass(ClassTree tree, Void unused) {
            Element element = trees.getElement(getCurrentPath());
            if (element instanceof TypeElement type && !type.getQualifiedName().isEmpty()) {
                out.println("T\t" + unit.getSourceFile().getName() + "\t" + type.getQualifiedName());
            }
            return super.visitClass(tree, unused);
        }

        @Override
        public Void visitMethodInvocation(MethodInvocationTree tree, Void unused) {
            report(tree, form(tree.getMethodSelect()));
            return super.visitMethodInvocation(tree, unused);
        }

        @Override
        public Void visitNewClass(NewClassTree tree, Void unused) {
            report(tree, "new T()");
            return super.visitNewClass(tree, unused);
        }

        private void report(Tree call, String form) {
            String[] caller = caller();
            if (caller == null) {
                return;  // a field initializer, an initializer block: no method around it
            }
            long line = unit.getLineMap().getLineNumber(trees.getSourcePositions().getStartPosition(unit, call));
            String[] callee = callee(call);
            String where = unit.getSourceFile().getName() + "\t" + line + "\t" + caller[0] + "\t" + caller[1];
            if (callee == null) {
                out.println("U\t" + where + "\t" + form);
            } else {
                out.println("C\t" + where + "\t" + callee[0] + "\t" + callee[1] + "\t" + form);
            }
        }

        /** The (type, member) of the outermost-named method around the current node, or null. */
        private String[] caller() {
            for (TreePath path = getCurrentPath(); path != null; path = path.getParentPath()) {
                if (path.getLeaf() instanceof MethodTree && path.getParentPath() != null
                        && path.getParentPath().getLeaf() instanceof ClassTree) {
                    Element owner = trees.getElement(path.getParentPath());
                    if (owner instanceof TypeElement type && !type.getQualifiedName().isEmpty()) {
                        MethodTree method = (MethodTree) path.getLeaf();
                        String name = method.getName().contentEquals("<init>") ? "<init>" : method.getName().toString();
                        return new String[] {type.getQualifiedName().toString(), name};
                    }
                }
            }
            return null;
        }

        /** The (declaring type, member) javac attributes the call to, or null. */
        private String[] callee(Tree call) {
            TreePath path = getCurrentPath();
            Element element = trees.getElement(path);
            if (call instanceof NewClassTree created && created.getClassBody() != null) {
                // an anonymous class: the type it extends or implements is the one instantiated
                Element type = trees.getElement(new TreePath(path, created.getIdentifier()));
                if (type instanceof TypeElement named) {
                    return new String[] {named.getQualifiedName().toString(), "<init>"};
                }
                return null;
            }
            if (!(element instanceof ExecutableElement method)) {
                return null;
            }
            Element owner = method.getEnclosingElement();
            if (!(owner instanceof TypeElement type)) {
                return null;
            }
            String name = method.getKind() == ElementKind.CONSTRUCTOR ? "<init>" : method.getSimpleName().toString();
            return new String[] {type.getQualifiedName().toString(), name};
        }

        /** The syntactic form of a method call, from what is written before the name. */
        private String form(ExpressionTree select) {
            if (select instanceof IdentifierTree id) {
                String name = id.getName().toString();
                return name.equals("this") || name.equals("super") ? "this()/super()" : "m()";
            }
            if (!(select instanceof MemberSelectTree member)) {
                return "other";
            }
            ExpressionTree target = member.getExpression();
            while (target instanceof ParenthesizedTree parenthesized) {
                target = parenthesized.getExpression();
            }
            if (target instanceof IdentifierTree id && id.getName().contentEquals("this")) {
                return "this.m()";
            }
            if (target instanceof IdentifierTree id && id.getName().contentEquals("super")) {
                return "super.m()";
            }
            if (target instanceof MemberSelectTree qualified
                    && (qualified.getIdentifier().contentEquals("this") || qualified.getIdentifier().contentEquals("super"))) {
                return "Outer.this.m()";
            }
            if (target instanceof MethodInvocationTree) {
                return "a().b()";
            }
            if (target instanceof NewClassTree) {
                return "new T().m()";
            }
            if (target instanceof IdentifierTree || target instanceof MemberSelectTree) {
                Element element = trees.getElement(new TreePath(new TreePath(getCurrentPath(), select), target));
                if (element == null) {
                    return "x.m() (unattributed)";
                }
                switch (element.getKind()) {
                    case CLASS, INTERFACE, ENUM, ANNOTATION_TYPE, RECORD:
                        return "Type.m()";
                    case FIELD, ENUM_CONSTANT:
                        return target instanceof IdentifierTree ? "field.m()" : "a.field.m()";
                    case LOCAL_VARIABLE, PARAMETER, EXCEPTION_PARAMETER, RESOURCE_VARIABLE, BINDING_VARIABLE:
                        return "variable.m()";
                    default:
                        return "other";
                }
            }
            return "other";
        }
    }
}
