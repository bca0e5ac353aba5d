from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import PageNumberPagination


class DefaultPagination(PageNumberPagination):
    """Pages of 50 (page_size: 1-500; other values fall back to 50). `page` is a whole number
    from 1 (anything else is a 400); a page past the last one is a 404."""

    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500
    page_query_description = "A page number from 1; past the last page the answer is 404."
    page_size_query_description = "Results per page, 1-500 (default 50)."

    def get_page_number(self, request, paginator):
        value = request.query_params.get(self.page_query_param)
        if value is None or value in self.last_page_strings:
            return value or 1
        if not value.isascii() or not value.isdigit() or int(value) < 1:
            raise ValidationError({self.page_query_param: ["Give a page number from 1."]})
        if len(value) > 18:  # past any last page (and int() refuses over 4,300 digits)
            raise NotFound("Invalid page.")
        return int(value)

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_query_param:
                parameter["schema"] = {"type": "integer", "minimum": 1}
            elif parameter["name"] == self.page_size_query_param:
                parameter["schema"] = {"type": "integer", "minimum": 1, "maximum": self.max_page_size}
        return parameters
