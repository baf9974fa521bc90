/* render: a guest that does real work per request: it renders a ~30 KB
 * HTML page (a table of products) from data loaded at start-up.
 *
 *   forkvm serve examples/out/render                          # built-in data
 *   forkvm serve --allow-read examples/data examples/out/render examples/data/products.csv
 *   curl 'http://127.0.0.1:8080/shop?user=Ada&sort=price'
 *
 * Start-up (done once, before the snapshot): the product table is either
 * generated (200 products, from a fixed-seed PRNG: always the same) or read
 * from the CSV file given as argv[1] (lines "sku,name,category,price_cents,stock";
 * blank lines and lines starting with '#' are skipped).
 *
 * Per request: the products are sorted by ?sort=id|name|price|stock (default
 * id; ties by id), and the page echoes the request path and ?user= (default
 * "guest"), both HTML-escaped. The output is deterministic: the same request
 * always gets the same bytes, and examples/rust/src/bin/render.rs produces
 * exactly the same page.
 */
#include "forkvm.h"
#include "example_util.h"
#include <stdint.h>

#define FIELD_MAX 64
#define MAX_PRODUCTS 10000

struct product {
    long id;
    char sku[FIELD_MAX];
    char name[FIELD_MAX];
    char category[FIELD_MAX];
    long price_cents;
    long stock;
};

static struct product *products;
static size_t n_products;

/* A 64-bit LCG (Knuth's MMIX constants); the top 31 bits are the output. */
static uint64_t rng_state = 0x2545f4914f6cdd1dULL;
static uint32_t rnd(void)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(rng_state >> 33);
}

static const char *const ADJECTIVES[] = {
    "Sturdy", "Elegant", "Rustic", "Compact", "Deluxe", "Classic", "Modern", "Vintage",
    "Portable", "Heavy-Duty", "Handmade", "Minimal", "Bright", "Quiet", "Smart", "Folding",
};
static const char *const MATERIALS[] = {
    "Oak", "Steel", "Copper", "Linen", "Ceramic", "Bamboo",
    "Glass", "Leather", "Wool", "Marble", "Walnut", "Brass",
};
static const char *const NOUNS[] = {
    "Lamp", "Chair", "Kettle", "Backpack", "Clock", "Desk", "Mug", "Blanket",
    "Shelf", "Speaker", "Notebook", "Planter", "Stool", "Tray", "Vase", "Bench",
};
static const char *const CATEGORIES[] = {
    "Home", "Kitchen", "Office", "Outdoor", "Travel", "Garden", "Lighting", "Decor",
};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static int generate(void)
{
    n_products = 200;
    products = calloc(n_products, sizeof *products);
    if (!products) return -1;
    for (size_t i = 0; i < n_products; i++) {
        struct product *p = &products[i];
        p->id = (long)i + 1;
        const char *adj = ADJECTIVES[rnd() % COUNT(ADJECTIVES)];
        const char *mat = MATERIALS[rnd() % COUNT(MATERIALS)];
        const char *noun = NOUNS[rnd() % COUNT(NOUNS)];
        snprintf(p->name, sizeof p->name, "%s %s %s", adj, mat, noun);
        snprintf(p->category, sizeof p->category, "%s", CATEGORIES[rnd() % COUNT(CATEGORIES)]);
        p->price_cents = 199 + (long)(rnd() % 99800);
        p->stock = (long)(rnd() % 500);
        snprintf(p->sku, sizeof p->sku, "SKU-%05ld-%04X", p->id, (unsigned)(rnd() & 0xffff));
    }
    return 0;
}

/* Copies the next comma-separated field of *line into out (truncated). */
static void next_field(char **line, char *out, size_t cap)
{
    char *s = *line;
    size_t n = strcspn(s, ",\r\n");
    size_t k = n < cap - 1 ? n : cap - 1;
    memcpy(out, s, k);
    out[k] = '\0';
    *line = s[n] == ',' ? s + n + 1 : s + n;
}

static int load(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        perror(path);
        return -1;
    }
    size_t cap = 0;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n' || line[0] == '\r' || line[0] == '\0') continue;
        if (n_products == MAX_PRODUCTS) break;
        if (n_products == cap) {
            cap = cap ? cap * 2 : 256;
            struct product *p = realloc(products, cap * sizeof *p);
            if (!p) {
                fclose(f);
                return -1;
            }
            products = p;
        }
        struct product *p = &products[n_products];
        char num[FIELD_MAX];
        char *s = line;
        p->id = (long)n_products + 1;
        next_field(&s, p->sku, sizeof p->sku);
        next_field(&s, p->name, sizeof p->name);
        next_field(&s, p->category, sizeof p->category);
        next_field(&s, num, sizeof num);
        p->price_cents = strtol(num, NULL, 10);
        next_field(&s, num, sizeof num);
        p->stock = strtol(num, NULL, 10);
        n_products++;
    }
    fclose(f);
    return 0;
}

enum sort_key { BY_ID, BY_NAME, BY_PRICE, BY_STOCK };

/* qsort has no context argument; the key travels in a thread-local. */
static __thread enum sort_key sort_key;

static int compare(const void *a, const void *b)
{
    const struct product *x = &products[*(const size_t *)a];
    const struct product *y = &products[*(const size_t *)b];
    int c = 0;
    switch (sort_key) {
    case BY_NAME: c = strcmp(x->name, y->name); break;
    case BY_PRICE: c = (x->price_cents > y->price_cents) - (x->price_cents < y->price_cents); break;
    case BY_STOCK: c = (x->stock > y->stock) - (x->stock < y->stock); break;
    case BY_ID: break;
    }
    if (c == 0) c = (x->id > y->id) - (x->id < y->id);
    return c;
}

static const char HEAD[] =
    "<!DOCTYPE html>\n"
    "<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
    "<title>Product catalogue</title>\n"
    "<style>\n"
    "body { font-family: sans-serif; margin: 2em; }\n"
    "table { border-collapse: collapse; }\n"
    "td, th { border: 1px solid #ccc; padding: 2px 8px; }\n"
    "td.num { text-align: right; }\n"
    "</style>\n</head>\n<body>\n<h1>Product catalogue</h1>\n";

static void render(struct buf *b, const struct forkvm_request *req)
{
    char user[256], sort[32];
    if (query_get(req->query, req->query_len, "user", user, sizeof user) < 0) strcpy(user, "guest");
    if (query_get(req->query, req->query_len, "sort", sort, sizeof sort) < 0) strcpy(sort, "id");
    if (strcmp(sort, "name") == 0) sort_key = BY_NAME;
    else if (strcmp(sort, "price") == 0) sort_key = BY_PRICE;
    else if (strcmp(sort, "stock") == 0) sort_key = BY_STOCK;
    else {
        sort_key = BY_ID;
        strcpy(sort, "id");
    }

    size_t *order = malloc((n_products ? n_products : 1) * sizeof *order);
    if (!order) {
        b->failed = 1;
        return;
    }
    for (size_t i = 0; i < n_products; i++) order[i] = i;
    qsort(order, n_products, sizeof *order, compare);

    buf_puts(b, HEAD);
    buf_puts(b, "<p>Hello, ");
    buf_add_html(b, user, strlen(user));
    buf_puts(b, "! You asked for <code>");
    buf_add_html(b, req->path, req->path_len);
    buf_printf(b, "</code>; sorted by %s.</p>\n", sort);
    buf_puts(b, "<table>\n<thead><tr><th>#</th><th>Name</th><th>Category</th><th>SKU</th>"
                "<th>Price</th><th>Stock</th></tr></thead>\n<tbody>\n");
    long items = 0, value = 0;
    for (size_t i = 0; i < n_products; i++) {
        const struct product *p = &products[order[i]];
        buf_printf(b, "<tr><td class=\"num\">%ld</td><td>", p->id);
        buf_add_html(b, p->name, strlen(p->name));
        buf_puts(b, "</td><td>");
        buf_add_html(b, p->category, strlen(p->category));
        buf_puts(b, "</td><td><code>");
        buf_add_html(b, p->sku, strlen(p->sku));
        buf_printf(b, "</code></td><td class=\"num\">$%ld.%02ld</td><td class=\"num\">%ld</td></tr>\n",
                   p->price_cents / 100, p->price_cents % 100, p->stock);
        items += p->stock;
        value += p->price_cents * p->stock;
    }
    buf_printf(b, "</tbody>\n</table>\n<p>%zu products; %ld items in stock, worth $%ld.%02ld.</p>\n",
               n_products, items, value / 100, value % 100);
    buf_puts(b, "</body>\n</html>\n");
    free(order);
}

static const char HTML[] = "Content-Type: text/html; charset=utf-8";
static const char TEXT[] = "Content-Type: text/plain; charset=utf-8";

static void handle(const struct forkvm_request *req)
{
    struct buf b = {0};
    render(&b, req);
    if (b.failed) {
        static const char oom[] = "out of memory\n";
        forkvm_respond(500, TEXT, sizeof TEXT - 1, oom, sizeof oom - 1);
    } else {
        forkvm_respond(200, HTML, sizeof HTML - 1, b.data, b.len);
    }
    buf_free(&b);
}

int main(int argc, char **argv)
{
    if (argc > 1 ? load(argv[1]) < 0 : generate() < 0) {
        fprintf(stderr, "render: cannot load the products\n");
        return 1;
    }
    if (forkvm_serve(handle) < 0) return 1;
    fprintf(stderr, "render: %zu products loaded; serve me with `forkvm serve`\n", n_products);
    return 0;
}
