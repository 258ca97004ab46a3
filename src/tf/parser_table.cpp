// Every op family's parse functions in one table.
#include "tf/tf_parser.hpp"

namespace kiln::tf_import {

const parser_table& get_parsers() {
    static const parser_table table = [] {
        parser_table t;
        add_graph_parsers(t);
        add_nn_parsers(t);
        add_elementwise_parsers(t);
        add_shape_parsers(t);
        add_select_parsers(t);
        add_sequence_parsers(t);
        add_resize_parsers(t);
        return t;
    }();
    return table;
}

}  // namespace kiln::tf_import
