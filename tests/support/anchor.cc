// placeholder so the support library has a source until the world harness lands
namespace dtrain::testing { int support_anchor = 0; }
